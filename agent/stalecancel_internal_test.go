package agent

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A cancel is stale (an earlier request's under the same id) only when it
// is older than the request by more than the margin: the clocks of the
// streams' leaders and of the worker may differ by less, and a cancel
// stored a moment before its request (ACP stdio's, a turn's in flight)
// still counts. An unknown time never makes it stale.
func TestStaleCancel(t *testing.T) {
	t.Parallel()
	stored := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		cancelAt time.Time
		want     bool
	}{
		{"a day older (an earlier request's)", stored.Add(-24 * time.Hour), true},
		{"just over the margin older", stored.Add(-staleCancelMargin - time.Millisecond), true},
		{"the margin older", stored.Add(-staleCancelMargin), false},
		{"a second older (clock skew, a publish in flight)", stored.Add(-time.Second), false},
		{"as old", stored, false},
		{"newer", stored.Add(time.Hour), false},
		{"cancel time unknown", time.Time{}, false},
	} {
		if got := staleCancel(c.cancelAt, stored, staleCancelMargin); got != c.want {
			t.Errorf("%s: stale %v, want %v", c.name, got, c.want)
		}
	}
	if staleCancel(stored.Add(-24*time.Hour), time.Time{}, staleCancelMargin) {
		t.Error("a request whose store time is unknown: stale, want counted")
	}
	if c := newCancelWatch(8); c.margin != staleCancelMargin || defaultConfig().staleMargin != staleCancelMargin {
		t.Errorf("margins %v, %v; want %v", c.margin, defaultConfig().staleMargin, staleCancelMargin)
	}
}

// A cancel the watch received before a request was stored (by more than
// the margin, 0 here) does not count for it, and the request stays covered
// (no read); a cancel received later (the request's own) moves the id's
// time and counts. An older time never replaces a newer one.
func TestCancelWatchIgnoresStaleCancel(t *testing.T) {
	t.Parallel()
	f := newWatchFixture(t, 8, false)
	f.c.margin = 0
	f.anchor(t)
	seq := f.storeRequest(t, "r")

	f.cancel(t, "r") // an earlier request's cancel
	<-f.recorded
	stored := time.Now() // the request is stored after it
	if cancelled, covered, stale := f.c.checkAt("r", seq, stored); cancelled || !covered || !stale {
		t.Fatalf("a cancel older than the request: cancelled %v, covered %v, stale %v; want false, true, true", cancelled, covered, stale)
	}
	if cancelled, covered, _ := f.c.checkAt("r", seq, time.Time{}); !cancelled || !covered {
		t.Fatalf("store time unknown: cancelled %v, covered %v; want any cancel to count", cancelled, covered)
	}

	f.cancel(t, "r") // the request's own cancel
	<-f.recorded
	f.c.recordAt("r", stored.Add(-24*time.Hour)) // an older stored cancel read later
	if cancelled, covered, stale := f.c.checkAt("r", seq, stored); !cancelled || !covered || stale {
		t.Fatalf("a cancel after the request: cancelled %v, covered %v, stale %v; want true, true, false", cancelled, covered, stale)
	}
}

// A stored cancel re-read for held requests stops only those stored before
// it (or within the margin after it); a live cancel (time zero) stops
// every one.
func TestStopCancelledAtSparesRequestsStoredAfterIt(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	w := &worker{byID: map[string][]*request{}, cancels: newCancelWatch(8)}
	held := func(stored time.Time) (*request, context.Context) {
		ctx, stop := context.WithCancelCause(context.Background())
		t.Cleanup(func() { stop(nil) })
		r := &request{id: "r", stored: stored, stop: stop}
		w.byID["r"] = append(w.byID["r"], r)
		return r, ctx
	}
	earlier, ectx := held(at.Add(-time.Minute))
	skewed, sctx := held(at.Add(staleCancelMargin)) // within the margin: counted
	later, lctx := held(at.Add(time.Hour))
	if stopped, stale := w.stopCancelledAt("r", at); stopped != 2 || stale != 1 {
		t.Fatalf("stopped %d, stale %d; want 2, 1", stopped, stale)
	}
	for _, c := range []struct {
		name string
		r    *request
		ctx  context.Context
		want bool
	}{{"stored before the cancel", earlier, ectx, true}, {"stored within the margin after it", skewed, sctx, true}, {"stored an hour after it", later, lctx, false}} {
		if stopped := errors.Is(context.Cause(c.ctx), ErrCancelled); stopped != c.want || c.r.cancelled != c.want {
			t.Errorf("%s: stopped %v (cancelled %v), want %v", c.name, stopped, c.r.cancelled, c.want)
		}
	}
	w.stopCancelled("r") // a live cancel
	if !errors.Is(context.Cause(lctx), ErrCancelled) {
		t.Error("a live cancel left a held request running")
	}
}
