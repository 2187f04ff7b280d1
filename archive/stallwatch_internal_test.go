package archive

import (
	"testing"
	"time"
)

// A consumer is given up when E2A_AUDIT has held messages it did not
// deliver for stallAfter, not when a message stored after a quiet spell
// is seen before its delivery: the idle time since the last arrival said
// nothing of how long E2A_AUDIT had held more, so a session idle for
// stallAfter was given up by the first check between a new message's
// store and its delivery (a live e2a dev logged "archiving stopped,
// retrying … nothing for 16.225s" for a message stored a moment before),
// and its batch read again.
func TestStallWatchCountsFromWhenE2AAuditHeldMore(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	w := stallWatch{arrived: t0}
	// A quiet spell: E2A_AUDIT holds nothing more.
	if _, stalled := w.check(t0.Add(time.Minute), 10, 10); stalled {
		t.Fatal("given up while E2A_AUDIT held nothing more")
	}
	// A message is stored, seen by the check before it is delivered.
	at := t0.Add(time.Minute + time.Second)
	if idle, stalled := w.check(at, 11, 10); stalled {
		t.Fatalf("given up at the first sight of a message not delivered yet (nothing for %v)", idle)
	}
	if _, stalled := w.check(at.Add(stallAfter-time.Millisecond), 11, 10); stalled {
		t.Fatal("given up before E2A_AUDIT held more for stallAfter")
	}
	idle, stalled := w.check(at.Add(stallAfter), 12, 10)
	if !stalled || idle != stallAfter {
		t.Fatalf("E2A_AUDIT held more for stallAfter: stalled %v after %v, want given up after %v", stalled, idle, stallAfter)
	}
	// A delivery starts the count again.
	w.delivered(at.Add(stallAfter + time.Second))
	if _, stalled := w.check(at.Add(stallAfter+2*time.Second), 12, 11); stalled {
		t.Fatal("given up right after a delivery")
	}
	if _, stalled := w.check(at.Add(2*stallAfter+2*time.Second), 12, 11); !stalled {
		t.Fatal("not given up after stallAfter more without a delivery")
	}
}
