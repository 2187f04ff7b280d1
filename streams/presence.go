package streams

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultPresenceGrace is how long a pool whose worker was seen pulling
// still counts as live without a pull waiting: several of a worker's pull
// rounds (agent.WithFetchWait, one second by default).
const DefaultPresenceGrace = 5 * time.Second

// maxPresencePools bounds a Presence's memory (pool names may come from
// clients).
const maxPresencePools = 10000

// Presence tells whether an agent pool has a live worker from readings of
// its consumer (agent-<pool> on E2A_REQUESTS). A worker pulls in rounds: a
// fetch that waits at most a second, then the next; between the two the
// consumer counts no waiting pull, so one reading of NumWaiting said "no
// live worker" about once in 40 while a worker served. A pool is live when
// a pull waits, or one was seen waiting within the grace; a pool never
// seen with one is not live. Requests delivered and not acknowledged
// (NumAckPending) prove nothing: a worker that died holding one leaves it
// pending until another pulls. A worker busy with all it may take pulls
// nothing meanwhile, and reads as none once the grace has passed. It is
// safe for concurrent use.
type Presence struct {
	grace time.Duration
	now   func() time.Time
	mu    sync.Mutex
	seen  map[string]time.Time
}

// NewPresence returns a Presence with grace (DefaultPresenceGrace when 0).
func NewPresence(grace time.Duration) *Presence {
	if grace <= 0 {
		grace = DefaultPresenceGrace
	}
	return &Presence{grace: grace, now: time.Now, seen: map[string]time.Time{}}
}

// Live reports whether pool has a live worker, given a reading of its
// consumer's info (nil: no consumer, not live).
func (p *Presence) Live(pool string, ci *jetstream.ConsumerInfo) bool {
	if ci == nil {
		return false
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if ci.NumWaiting > 0 {
		if _, ok := p.seen[pool]; !ok && len(p.seen) >= maxPresencePools {
			clear(p.seen)
		}
		p.seen[pool] = now
		return true
	}
	at, ok := p.seen[pool]
	return ok && now.Sub(at) < p.grace
}
