package obs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// degraded is a failed check that does not make the process unready:
// JetStream cannot answer (no quorum, no answer in time) while the
// process's own connection is up. Every replica of a stage meets it
// alike, and each one's front doors answer it with their protocol's
// retryable refusal (503 unavailable with Retry-After, within a second);
// were all of them unready, Kubernetes' Service would have no endpoint
// left, and clients would get the load balancer's bare 503 or a refused
// connection instead. /readyz answers 200 "degraded" naming it.
type degraded struct{ err error }

func (d degraded) Error() string { return d.err.Error() }
func (d degraded) Unwrap() error { return d.err }

// Degraded reports whether err, a check's, is one that leaves the
// process ready, degraded: JetStream unavailable.
func Degraded(err error) bool {
	var d degraded
	return errors.As(err, &d)
}

// jetStreamFailure is err, of a JetStream API call, marked degraded when
// it says JetStream cannot answer now rather than that what was asked
// for is missing or refused: an API error of code 503 (10008, "JetStream
// system temporarily unavailable": no meta leader, no quorum), or no
// answer within the call's deadline (the check's 2 s; nats.ErrTimeout).
// A missing stream, bucket or consumer (404) or a permission stays a
// failure: it is this deployment's, and no wait mends it.
func jetStreamFailure(err error) error {
	var api *jetstream.APIError
	if errors.As(err, &api) && api.Code == http.StatusServiceUnavailable ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return degraded{err}
	}
	return err
}

// ErrNoLeader is a stream's, bucket's or consumer's info answered while
// its replicas have no leader (an R3 asset two of whose servers are gone):
// a member answers the info, but nothing can be written to it or read
// from it. The check is degraded, as when JetStream cannot answer at all.
var ErrNoLeader = errors.New("no leader (its replicas have no quorum)")

// leaderless is a degraded failure naming what when ci, an info's cluster
// part, has no leader; nil otherwise (a single server names itself).
func leaderless(what string, ci *jetstream.ClusterInfo) error {
	if ci != nil && ci.Leader == "" {
		return degraded{fmt.Errorf("%s: %w", what, ErrNoLeader)}
	}
	return nil
}

// StreamPresent is ready when stream name exists (one stream info,
// which every stage's NATS user may make); a failure names it.
func StreamPresent(js jetstream.JetStream, name string) Check {
	return func(ctx context.Context) error {
		st, err := js.Stream(ctx, name)
		if err != nil {
			return jetStreamFailure(fmt.Errorf("stream %s: %w", name, err))
		}
		return leaderless("stream "+name, st.CachedInfo().Cluster)
	}
}

// BucketPresent is ready when key-value bucket name exists (one stream
// info, of KV_<name>); a failure names the bucket ("bucket E2A_TASKS:
// …"). Ingress reads and writes its buckets per request: a process whose
// bucket was deleted would report ready and fail every request.
func BucketPresent(js jetstream.JetStream, name string) Check {
	return func(ctx context.Context) error {
		st, err := js.Stream(ctx, "KV_"+name) // what js.KeyValue reads
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			err = jetstream.ErrBucketNotFound
		}
		if err != nil {
			return jetStreamFailure(fmt.Errorf("bucket %s: %w", name, err))
		}
		return leaderless("bucket "+name, st.CachedInfo().Cluster)
	}
}

// ConsumerPresent is ready when the durable consumer name exists on
// stream (one consumer info). The agent runtime and the push stage make
// their durable consumers again when one is deleted under them; until
// they have (or when they cannot: a permission, a full account), the
// process pulls nothing while it looks alive.
func ConsumerPresent(js jetstream.JetStream, stream, name string) Check {
	return func(ctx context.Context) error {
		c, err := js.Consumer(ctx, stream, name)
		if err != nil {
			return jetStreamFailure(fmt.Errorf("consumer %s on %s: %w", name, stream, err))
		}
		return leaderless("consumer "+name+" on "+stream, c.CachedInfo().Cluster)
	}
}

// Cached is c with its answer kept for ttl: /readyz is public on
// E2A_HTTP_ADDR and polled every few seconds, and the JetStream checks
// behind it are API calls to the cluster, so however often it is asked a
// process makes them at most once per ttl. Concurrent calls share one
// check. An answer cut short by the caller's own context (a client gone)
// is not kept.
func Cached(ttl time.Duration, c Check) Check {
	var (
		mu   sync.Mutex
		at   time.Time
		last error
	)
	return func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if !at.IsZero() && time.Since(at) < ttl {
			return last
		}
		err := c(ctx)
		if ctx.Err() == nil {
			at, last = time.Now(), err
		}
		return err
	}
}
