package sleepctx

import (
	"context"
	"iter"
	"math/rand/v2"
	"time"
)

// Sleep waits d or until ctx is done: nil after d, ctx.Err() when ctx
// ended first. The timer is stopped on return.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SleepCause is Sleep returning context.Cause(ctx) when ctx ended first:
// the reason a handler's context was cancelled with, for an agent that
// answers it.
func SleepCause(ctx context.Context, d time.Duration) error {
	if err := Sleep(ctx, d); err != nil {
		return context.Cause(ctx)
	}
	return nil
}

// Ticks yields the time every d (a time.Ticker's ticks) until ctx is done
// or the loop over it stops; the ticker is stopped then. A tick the loop
// was too slow to take is dropped, as a Ticker drops it.
func Ticks(ctx context.Context, d time.Duration) iter.Seq[time.Time] {
	return func(yield func(time.Time) bool) {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				if !yield(now) {
					return
				}
			}
		}
	}
}

// Backoff waits before attempt (from 0) of a compare-and-set that
// another writer came first on: nothing before the first, then a random
// time below a ceiling that is base for the second attempt and doubles
// with each one after, up to limit, so that writers that collided do not
// collide again in step (no wait with a base or limit ≤ 0). It returns
// ctx.Err() when ctx ends first.
func Backoff(ctx context.Context, attempt int, base, limit time.Duration) error {
	if attempt <= 0 {
		return nil
	}
	ceil := limit
	if shift := attempt - 1; shift < 63 && base <= limit>>shift {
		ceil = base << shift // within limit, so it cannot overflow
	}
	if ceil <= 0 {
		return ctx.Err()
	}
	return Sleep(ctx, rand.N(ceil))
}
