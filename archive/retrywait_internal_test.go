package archive

import (
	"testing"
	"time"
)

// Failures one after another wait longer each time, up to
// lastRetryWait; the first failure after the archive progressed (or a
// conflict) is retried after firstRetryWait again, not after the wait the
// failures long past had reached.
func TestRetryWaitRestartsWhenFresh(t *testing.T) {
	var w retryWait
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i, ms := range want {
		if got := w.next(false); got != ms*time.Millisecond {
			t.Fatalf("failure %d in a row: wait %v, want %v", i+1, got, ms*time.Millisecond)
		}
	}
	if got := w.next(true); got != firstRetryWait {
		t.Fatalf("first failure after progress: wait %v, want %v", got, firstRetryWait)
	}
	if got := w.next(false); got != 2*firstRetryWait {
		t.Fatalf("the failure after it: wait %v, want %v", got, 2*firstRetryWait)
	}
}
