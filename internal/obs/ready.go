package obs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamPresent is ready when stream name exists (one stream info,
// which every stage's NATS user may make); a failure names it.
func StreamPresent(js jetstream.JetStream, name string) Check {
	return func(ctx context.Context) error {
		if _, err := js.Stream(ctx, name); err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
		return nil
	}
}

// BucketPresent is ready when key-value bucket name exists (one stream
// info, of KV_<name>); a failure names the bucket ("bucket E2A_TASKS:
// …"). Ingress reads and writes its buckets per request: a process whose
// bucket was deleted would report ready and fail every request.
func BucketPresent(js jetstream.JetStream, name string) Check {
	return func(ctx context.Context) error {
		if _, err := js.KeyValue(ctx, name); err != nil { // one info of its stream
			return fmt.Errorf("bucket %s: %w", name, err)
		}
		return nil
	}
}

// ConsumerPresent is ready when the durable consumer name exists on
// stream (one consumer info). The agent runtime and the push stage make
// their durable consumers again when one is deleted under them; until
// they have (or when they cannot: a permission, a full account), the
// process pulls nothing while it looks alive.
func ConsumerPresent(js jetstream.JetStream, stream, name string) Check {
	return func(ctx context.Context) error {
		if _, err := js.Consumer(ctx, stream, name); err != nil {
			return fmt.Errorf("consumer %s on %s: %w", name, stream, err)
		}
		return nil
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
