package audit_test

import (
	"strings"
	"sync"
	"sync/atomic"
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
	checkShown(t, rec, id, n)
}

// checkShown checks that rec shows every one of the n frames of request id
// once, in order, and a clean summary of n frames.
func checkShown(t *testing.T, rec *recorder, id string, n int64) {
	t.Helper()
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
			if !r.Summary.OK() || int64(r.Summary.Frames) != n {
				t.Errorf("summary %+v", r.Summary)
			}
		}
	}
	if next != n {
		t.Errorf("%d frames shown, want %d", next, n)
	}
}

// TestTailLiveBytesBounded: a Tail whose reader is slow queues at most
// TailOptions.LiveBytes of live messages (16 MiB by default, as egress's
// live buffer); what the queue could not hold is read back from
// E2A_RESPONSES, every frame once, in order. The queue was bounded in
// messages alone: 8192 of them, up to 64 GiB of 8 MB messages (the
// max_payload of deploy/nats), held while `e2a tail | less` was paused.
func TestTailLiveBytesBounded(t *testing.T) {
	js, nc := server(t)
	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const n, size, bound = 32, 256 << 10, 1 << 20
	id := "large"
	var peak, seen, queued atomic.Int64
	delivered := make(chan struct{})
	audit.SetTailLive(a, func(held int64, q bool) {
		if q {
			queued.Add(1)
			peak.Store(max(peak.Load(), held)) // one subscription: one goroutine
		}
		if seen.Add(1) == n {
			close(delivered)
		}
	})
	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	rec := newRecorder()
	rec.gate = func(r audit.Record) {
		// The reader stalls at the first frame of id, until released.
		if r.RequestID == id && r.Kind == audit.KindFrame {
			once.Do(func() { close(stalled) })
			<-release
		}
	}
	_, errc, cancel := startTailWith(t, js, a, audit.TailOptions{PollInterval: 20 * time.Millisecond, LiveBytes: bound}, rec)
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: id})
	text := strings.Repeat("x", size)
	for i := range n - 1 {
		publishFrame(t, js, id, int64(i), natstest.TextFrame(id, int64(i), text))
	}
	publishFrame(t, js, id, n-1, frame(id, n-1, true))
	for _, c := range []chan struct{}{stalled, delivered} { // delivered: every live message queued or dropped
		select {
		case <-c:
		case <-time.After(20 * time.Second):
			t.Fatalf("the tail did not stall (%t) or the live messages did not come (%d of %d)", c == delivered, seen.Load(), n)
		}
	}
	if p := peak.Load(); p > bound {
		t.Errorf("the stalled tail's live queue held %d KiB (%d messages queued), more than its LiveBytes (%d KiB)", p>>10, queued.Load(), bound>>10)
	}
	close(release)
	if missing := waitSummaries(rec, 20*time.Second, id); len(missing) > 0 {
		t.Fatalf("no summary of %v: what the queue dropped was never read back", missing)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Tail: %v", err)
	}
	checkShown(t, rec, id, n)
}
