package ingress

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// WithPoolCheck refuses requests for an agent pool that has no durable
// consumer on E2A_REQUESTS (no worker of that pool ever started: a typo such
// as ?agent=nopool would otherwise be accepted and wait forever), with
// ErrUnknownPool in each protocol's shape. A known pool with no worker
// pulling right now is accepted, with a warning in the answer and the log.
// Live pools are cached for ttl (default 2 s; an unknown pool, or one
// without a live worker, is looked up again at once); a lookup waits
// poolLookupTimeout at most, and one that fails lets the request through.
// `e2a dev`, `e2a serve` and `e2a acp` forwarding to a
// pipeline enable it unless E2A_ACCEPT_UNKNOWN_POOLS is set.
func WithPoolCheck(ttl time.Duration) Option {
	return func(o *options) error {
		if ttl < 0 {
			return fmt.Errorf("ingress: pool check ttl must be >= 0")
		}
		if ttl == 0 {
			ttl = 2 * time.Second
		}
		o.poolTTL = ttl
		return nil
	}
}

// poolLookupTimeout bounds the pool check's lookup of a pool's consumer. A
// failed lookup lets the request through, so it need not wait for the
// JetStream API's 5 s: while the consumer's leader is gone or frozen (an
// election takes 4–9 s) the lookup goes unanswered, and every request
// waited those 5 s before its publish even began (accepted after 5 s, or
// refused 503 after up to 10 s when E2A_REQUESTS had no leader either).
const poolLookupTimeout = time.Second

// poolState is what the pool check knows of a pool.
type poolState struct {
	known bool // its consumer exists
	live  bool // a worker is pulling, or was a moment ago (streams.Presence)
	at    time.Time
}

// pools caches pool states.
type pools struct {
	js       jetstream.JetStream
	ttl      time.Duration
	now      func() time.Time
	presence *streams.Presence
	mu       sync.Mutex
	m        map[string]poolState
}

func newPools(js jetstream.JetStream, ttl time.Duration, now func() time.Time, presence *streams.Presence) *pools {
	return &pools{js: js, ttl: ttl, now: now, presence: presence, m: map[string]poolState{}}
}

// state returns the pool's state, from the cache when fresh and live (an
// unknown pool, or one without a live worker, is always looked up again,
// so a pool or a worker started a moment ago is found: a reading without
// a live worker, cached, warned "no live worker" for the ttl after the
// worker started, or after one reading between a live worker's pulls).
func (p *pools) state(ctx context.Context, pool string) (poolState, error) {
	now := p.now()
	p.mu.Lock()
	st, ok := p.m[pool]
	p.mu.Unlock()
	if ok && st.known && st.live && now.Sub(st.at) < p.ttl {
		return st, nil
	}
	name, err := streams.AgentConsumerName(pool)
	if err != nil {
		return poolState{}, invalidPool(err)
	}
	ctx, cancel := context.WithTimeout(ctx, poolLookupTimeout)
	defer cancel()
	c, err := p.js.Consumer(ctx, streams.RequestsStream, name)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		st = poolState{at: now}
	case err != nil:
		return poolState{}, err
	default:
		st = poolState{known: true, live: p.presence.Live(pool, c.CachedInfo()), at: now}
	}
	p.mu.Lock()
	if len(p.m) > 10000 {
		clear(p.m) // pool names come from clients: keep the cache bounded
	}
	p.m[pool] = st
	p.mu.Unlock()
	return st, nil
}

// checkPool applies WithPoolCheck: ErrUnknownPool for a pool without a
// consumer; for a known pool without a live worker, the warning to give
// the client ("" otherwise). A failed lookup lets the request through (the
// publish that follows reports an unavailable server).
func (s *Server) checkPool(ctx context.Context, pool string) (warning string, err error) {
	if s.pools == nil {
		return "", nil
	}
	st, err := s.pools.state(ctx, pool)
	if err != nil {
		if errors.Is(err, ErrInvalidPool) {
			return "", err
		}
		s.opts.log.Warn("pool check failed; accepting", "pool", pool, "err", err)
		return "", nil
	}
	if !st.known {
		return "", fmt.Errorf("%w: %q (no worker of this pool has ever started on this pipeline's NATS server; check the name, or start `e2a agent --pool %s` with E2A_NATS_URL set to this pipeline's)", ErrUnknownPool, pool, pool)
	}
	if !st.live {
		s.opts.log.Warn("request for a pool with no live worker", "pool", pool)
		return fmt.Sprintf("agent pool %q has no live worker right now: the request waits until one starts", pool), nil
	}
	return "", nil
}

// Pools reports the agent pools that have a durable consumer on
// E2A_REQUESTS and whether a worker of each is pulling, or was a
// moment ago (streams.Presence): "live" or "no live worker" (requests for
// it wait). It is the pools detail of /readyz.
func (s *Server) Pools(ctx context.Context) (map[string]string, error) {
	st, err := s.js.Stream(ctx, streams.RequestsStream)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	lister := st.ListConsumers(ctx)
	for ci := range lister.Info() {
		pool, ok := strings.CutPrefix(ci.Name, "agent-")
		if !ok {
			continue
		}
		if s.presence.Live(pool, ci) {
			out[pool] = "live"
		} else {
			out[pool] = "no live worker"
		}
	}
	return out, lister.Err()
}

// invalidPool is ErrInvalidPool for err, the subjects package's refusal of
// a pool name (or of the request id it goes with), matching both: its text
// says it once and names the name (`ingress: invalid agent pool: "a.b"`,
// not "… agent pool: subjects: invalid agent pool name: \"a.b\"").
func invalidPool(err error) error { return poolError{err} }

type poolError struct{ err error }

func (e poolError) Error() string {
	if rest, ok := strings.CutPrefix(e.err.Error(), subjects.ErrInvalidPool.Error()); ok {
		return ErrInvalidPool.Error() + rest
	}
	return ErrInvalidPool.Error() + ": " + e.err.Error()
}

func (e poolError) Unwrap() []error { return []error{ErrInvalidPool, e.err} }
