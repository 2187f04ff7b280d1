package agent_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// rvTurns is a resumable handler for two turns of one task: turn "…-1"
// writes "a", waits for release, writes "b" and completes; turn "…-2"
// writes "two" and completes. It counts each turn's handler calls.
type rvTurns struct {
	release chan struct{}
	once    sync.Once
	calls   sync.Map // request id → *atomic.Int32
	started chan string
}

func newRVTurns() *rvTurns {
	return &rvTurns{release: make(chan struct{}), started: make(chan string, 8)}
}

func (h *rvTurns) let() { h.once.Do(func() { close(h.release) }) }

func (h *rvTurns) count(id string) int32 {
	v, _ := h.calls.LoadOrStore(id, new(atomic.Int32))
	return v.(*atomic.Int32).Load()
}

func (h *rvTurns) Serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	v, _ := h.calls.LoadOrStore(env.RequestID, new(atomic.Int32))
	v.(*atomic.Int32).Add(1)
	select {
	case h.started <- env.RequestID:
	default:
	}
	if env.RequestID[len(env.RequestID)-1] == '2' {
		if err := w.Chunk(e2a.DeltaText, "two"); err != nil {
			return err
		}
		return w.Complete(map[string]any{"content": "two"})
	}
	if w.ResumeAfter() < 0 {
		if err := w.Chunk(e2a.DeltaText, "a"); err != nil {
			return err
		}
		if err := w.Sync(); err != nil {
			return err
		}
	}
	select {
	case <-h.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := w.Chunk(e2a.DeltaText, "b"); err != nil {
		return err
	}
	return w.Complete(map[string]any{"content": "ab"})
}

// rvCheckTurn checks a request's stored frames: gapless from 0, one final
// frame, the last, succeeded, with text want.
func rvCheckTurn(t *testing.T, s *server, id, want string) []*e2a.Response {
	t.Helper()
	fr := waitFinal(t, s.nc, id, 20*time.Second)
	for i, f := range fr {
		if f.Sequence != int64(i) || f.IsFinal != (i == len(fr)-1) {
			t.Fatalf("%s: frame %d has sequence %d final %v (%d frames)", id, i, f.Sequence, f.IsFinal, len(fr))
		}
	}
	if got := text(t, fr); got != want || fr[len(fr)-1].Status != e2a.StatusSucceeded {
		t.Fatalf("%s: text %q status %s, want %q succeeded", id, got, fr[len(fr)-1].Status, want)
	}
	return fr
}

// TestRecoveryWorkerKilledHoldingQueuedTurn: worker B (one slot)
// runs turn 1 of a task; worker A picked up turn 2, queued behind it, and
// is killed (connection closed) while turn 2 waits. Turn 1 ends on B right
// after the kill. Turn 2 is redelivered and runs on B once, after turn 1's
// final frame, within issue 41's 5 s of the kill (default AckWait 4 s);
// both turns' frames are gapless, exactly once.
func TestRecoveryWorkerKilledHoldingQueuedTurn(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	h := newRVTurns()
	t.Cleanup(h.let)
	startWorker(t, s.connect(t), "rvq", h, agent.WithConcurrency(1), agent.WithResumable(true), agent.WithWorkerID("B"))
	waitConsumer(t, s.js, "rvq")
	publish(t, s.js, "rvq", request("rvq-1", nil))
	testkit.Receive(t, h.started, 10*time.Second, "turn 1 did not start on B")
	ncA := s.connect(t)
	startWorker(t, ncA, "rvq", h, agent.WithResumable(true), agent.WithWorkerID("A"))
	publishAfter(t, s.js, "rvq", request("rvq-2", nil), "rvq-1")
	waitPending(t, s.js, "rvq", 2) // A holds turn 2, waiting
	killed := time.Now()
	ncA.Close()
	h.let()
	fr1 := rvCheckTurn(t, s, "rvq-1", "ab")
	fr2 := rvCheckTurn(t, s, "rvq-2", "two")
	_, final1 := finalSeq(t, s, "rvq-1")
	first2, _ := finalSeq(t, s, "rvq-2")
	if first2 <= final1 {
		t.Errorf("turn 2's first frame at stream sequence %d, before turn 1's final at %d", first2, final1)
	}
	if n := h.count("rvq-2"); n != 1 {
		t.Errorf("turn 2's handler ran %d times, want once", n)
	}
	if w, _ := fr2[0].Provenance.Details["worker"].(string); w != "B" {
		t.Errorf("turn 2's first frame written by %q, want B", w)
	}
	took := rvAt(t, fr2[0]).Sub(killed)
	t.Logf("kill → turn 2's first frame %v (turn 1: %d frames)", took, len(fr1))
	if took > recoveryTarget {
		t.Errorf("turn 2 resumed %v after the kill, want ≤ %v", took, recoveryTarget)
	}
}

// TestRecoveryWorkerKilledHoldingBothTurns: worker A runs turn 1 of
// a task (one frame written) and holds turn 2, queued behind it; A is
// killed. Worker B takes both over: turn 1 resumes after its stored frame
// (fenced, no frame twice), turn 2 runs once after turn 1's final frame;
// turn 1's first frame from B within 5 s of the kill.
func TestRecoveryWorkerKilledHoldingBothTurns(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	hA := newRVTurns() // never released: A dies holding turn 1
	ncA := s.connect(t)
	startWorker(t, ncA, "rvb", hA, agent.WithResumable(true), agent.WithWorkerID("A"))
	waitConsumer(t, s.js, "rvb")
	publish(t, s.js, "rvb", request("rvb-1", nil))
	testkit.Receive(t, hA.started, 10*time.Second, "turn 1 did not start on A")
	publishAfter(t, s.js, "rvb", request("rvb-2", nil), "rvb-1")
	waitPending(t, s.js, "rvb", 2)
	hB := newRVTurns()
	hB.let()
	startWorker(t, s.connect(t), "rvb", hB, agent.WithResumable(true), agent.WithWorkerID("B"))
	killed := time.Now()
	ncA.Close()
	fr1 := rvCheckTurn(t, s, "rvb-1", "ab")
	rvCheckTurn(t, s, "rvb-2", "two")
	_, final1 := finalSeq(t, s, "rvb-1")
	first2, _ := finalSeq(t, s, "rvb-2")
	if first2 <= final1 {
		t.Errorf("turn 2's first frame at stream sequence %d, before turn 1's final at %d", first2, final1)
	}
	if n := hB.count("rvb-2") + hA.count("rvb-2"); n != 1 {
		t.Errorf("turn 2's handler ran %d times, want once", n)
	}
	took := rvAt(t, fr1[1]).Sub(killed)
	t.Logf("kill → turn 1's first frame from B %v; workers %s", took, fmt.Sprint(fr1[1].Provenance.Details["worker"]))
	if took > recoveryTarget {
		t.Errorf("turn 1 resumed %v after the kill, want ≤ %v", took, recoveryTarget)
	}
}

// rvAt is when frame f was written (its timestamp, to the millisecond).
func rvAt(t *testing.T, f *e2a.Response) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, f.Timestamp)
	if err != nil {
		t.Fatal(err)
	}
	return at
}
