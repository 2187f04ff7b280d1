package audit_test

import (
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestTailReadsBackWhatItsFullLiveBufferDropped: a Tail whose reader is
// slow (`e2a tail | less` paused, a busy terminal) drops live messages
// beyond its buffer of 8192, to read them back from E2A_RESPONSES. It read
// a dropped message back only when a later live message of its request
// showed the gap: a request whose last messages, its final frame among
// them, were dropped never got them, nor its summary.
func TestTailReadsBackWhatItsFullLiveBufferDropped(t *testing.T) {
	js, nc := server(t)
	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	rec, errc, cancel := startTail(t, js, a, audit.TailOptions{PollInterval: 20 * time.Millisecond})
	// Nothing reads rec's records until the summary is waited for: Tail
	// blocks in emit once rec's 1024 are queued, and its live buffer
	// fills behind it.
	const n = 10_000
	id := "flood"
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: id})
	for i := range n {
		publishFrame(t, js, id, int64(i), frame(id, int64(i), i == n-1))
	}
	if missing := waitSummaries(rec, 20*time.Second, id); len(missing) > 0 {
		t.Fatalf("no summary of %v: the final frame, dropped live, was never read back", missing)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Tail: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	next := int64(0)
	for _, r := range rec.recs {
		switch {
		case r.RequestID != id:
		case r.Kind == audit.KindFrame:
			if r.Sequence == nil || *r.Sequence != next {
				t.Fatalf("frame %v shown where %d was expected", r.Sequence, next)
			}
			next++
		case r.Kind == audit.KindSummary:
			if !r.Summary.OK() || r.Summary.Frames != n {
				t.Errorf("summary %+v", r.Summary)
			}
		}
	}
	if next != n {
		t.Errorf("%d frames shown, want %d", next, n)
	}
}
