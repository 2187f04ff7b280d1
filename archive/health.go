package archive

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// DefaultStallAfter is how long an archiver fails without progress before
// it reports itself stalled (Health.Check, e2a_archive_stalled_seconds): far
// above a NATS leader's failover, far below E2A_AUDIT's retention.
const DefaultStallAfter = time.Minute

// Health is what an archiver reports of itself for a readiness check
// (`e2a archive`'s /readyz): pass one to Run with WithHealth. It is safe
// for concurrent use.
type Health struct {
	mu      sync.Mutex
	after   time.Duration
	since   time.Time // when the archiver began failing without progress; zero while it progresses
	lastErr error
}

// NewHealth returns a Health reporting a stall after DefaultStallAfter.
func NewHealth() *Health { return &Health{after: DefaultStallAfter} }

// Check returns an error, naming the archiver's last failure, while the
// archiver it is given to has failed for longer than its stall delay
// without storing a batch or catching up with E2A_AUDIT.
func (h *Health) Check(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d := time.Since(h.since); !h.since.IsZero() && d >= h.after {
		return fmt.Errorf("archiver stalled for %s (nothing archived; E2A_AUDIT drops what is not archived after its max age): %w",
			d.Round(time.Second), h.lastErr)
	}
	return nil
}

// setAfter sets the stall delay (WithStallAfter).
func (h *Health) setAfter(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.after = d
}

// set records since (zero: progressing) and the last failure.
func (h *Health) set(since time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.since, h.lastErr = since, err
}

// failed records a session's failure: the stall starts at the first
// failure since the last progress, and is reported (Health, the gauge)
// once it lasts longer than the stall delay.
func (a *archiver) failed(err error) {
	now := time.Now()
	if a.failingSince.IsZero() {
		a.failingSince = now
	}
	if d := now.Sub(a.failingSince); d >= a.o.stallAfter {
		a.m.stalled.Set(d.Seconds())
	}
	if a.o.health != nil {
		a.o.health.set(a.failingSince, err)
	}
}

// progressed records progress (a batch stored, or E2A_AUDIT read to its
// end): no stall.
func (a *archiver) progressed() {
	if a.failingSince.IsZero() {
		return
	}
	a.failingSince = time.Time{}
	a.m.stalled.Set(0)
	if a.o.health != nil {
		a.o.health.set(time.Time{}, nil)
	}
}
