package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// chunk writes text as a raw chunk frame (Write: no coalescing).
func chunk(w agent.Writer, text string) error {
	return w.Write(e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: text}, false)
}

// burst is a handler writing n chunks "0", "1"… at once, then the final.
func burst(n int) agent.Handler {
	return agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		for i := range n {
			if err := chunk(w, fmt.Sprint(i)); err != nil {
				return err
			}
		}
		return w.Complete("done")
	})
}

// holdFirst returns a beforeBurst hook that, at the publish of request id's
// first message, closes taken (the writer has taken its queue: frame 0
// alone when the handler waits for taken after writing it) and holds the
// publish until release is closed.
func holdFirst(id string) (hook agent.Option, taken, release chan struct{}) {
	taken, release = make(chan struct{}), make(chan struct{})
	return agent.WithBeforeBurst(func(rid string, first int64, n int) {
		if rid == id && first == 0 {
			close(taken)
			<-release
		}
	}), taken, release
}

// frameCounts is how many frames each stored message of msgs holds.
func frameCounts(t *testing.T, msgs []streams.RawMsg) []int {
	t.Helper()
	out := make([]int, len(msgs))
	for i, m := range msgs {
		n, err := e2a.BurstCount(m.Header.Get(subjects.HeaderFrames))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = n
	}
	return out
}

// The frames a handler writes while a message is in flight are stored
// together as the next message: frame 0 goes alone, and chunks 1…6, all
// written while its publish is held, share the second message (the final
// frame with them or after them).
func TestBurstStoresFramesTogether(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const id = "together-1"
	hold, taken, release := holdFirst(id)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		for i := range 7 {
			if err := chunk(w, fmt.Sprint(i)); err != nil {
				return err
			}
			if i == 0 {
				<-taken
			}
		}
		close(release) // chunks 1…6 are queued behind frame 0
		return w.Complete("done")
	})
	startWorker(t, s.connect(t), "together", h, agent.WithoutHeartbeats(), hold)
	waitConsumer(t, s.js, "together")
	publish(t, s.js, "together", request(id, nil))
	fr := waitFinal(t, s.nc, id, 10*time.Second)
	if len(fr) != 8 || text(t, fr) != "0123456" {
		t.Fatalf("%d frames %q, want 0123456 and the final", len(fr), text(t, fr))
	}
	_, msgs := storedFrames(t, s.nc, id)
	counts := frameCounts(t, msgs)
	if len(counts) < 2 || len(counts) > 3 || counts[0] != 1 || counts[1] < 6 {
		t.Fatalf("frames per stored message %v, want [1 7] or [1 6 1]", counts)
	}
	// Every message is fenced on the one before: the burst's E2A-Sequence
	// is its first frame's.
	if got := msgs[1].Header.Get(subjects.HeaderSequence); got != "1" {
		t.Errorf("burst E2A-Sequence %q, want 1", got)
	}
}

// A burst whose expected last sequence is no longer the subject's (another
// writer stored a frame meanwhile) is refused whole: none of its frames is
// stored, the writer reports ErrFenced, and the subject keeps frame 0 and
// the other writer's frame.
func TestBurstFencedWhole(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const id = "fenced-burst-1"
	other := `{"protocol_version":"1.0","response_id":"other-1","request_id":"` + id + `","sequence":1,"is_final":false,"status":"in_progress",` +
		`"response_kind":"e2a.chunk","timestamp":"2026-01-01T00:00:00+00:00","provenance":{"source_protocol":"e2a"},"body":{"delta_kind":"text","delta":"other"}}`
	subj, _ := subjects.Response(id)
	intruded := make(chan error, 1)
	taken := make(chan struct{})
	hook := agent.WithBeforeBurst(func(rid string, first int64, n int) {
		if rid == id && first == 0 {
			close(taken)
		}
		if rid != id || first != 1 {
			return
		}
		last, err := streams.LastBySubject(context.Background(), s.nc, streams.ResponsesStream, subj)
		if err == nil {
			_, err = agent.PublishRaw(s.js, id, 1, last.Seq, []byte(other))
		}
		intruded <- err
	})
	result := make(chan error, 1)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		var err error
		for _, tx := range []string{"a", "b", "c"} {
			if err = chunk(w, tx); err != nil {
				break
			}
			if tx == "a" {
				<-taken // frame 0 goes alone
			}
		}
		if err == nil {
			err = w.Complete("done")
		}
		<-ctx.Done()
		result <- errors.Join(err, context.Cause(ctx))
		return err
	})
	reg := prometheus.NewRegistry()
	startWorker(t, s.connect(t), "fenced", h, agent.WithoutHeartbeats(), agent.WithMetrics(reg), hook)
	waitConsumer(t, s.js, "fenced")
	publish(t, s.js, "fenced", request(id, nil))
	if err := <-intruded; err != nil {
		t.Fatal(err)
	}
	err := testkit.Receive(t, result, 20*time.Second, "the writer was not fenced")
	if !errors.Is(err, agent.ErrFenced) {
		t.Fatalf("the fenced writer got %v, want ErrFenced", err)
	}
	waitMetric(t, reg, "e2a_agent_requests_handled_total", map[string]string{"outcome": agent.OutcomeFenced}, 1)
	fr, _ := storedFrames(t, s.nc, id)
	if len(fr) != 2 || text(t, fr) != "aother" {
		t.Fatalf("stored %d frames %q, want a and the other writer's", len(fr), text(t, fr))
	}
}

// Bursts stay within the server's max_payload: with 64 KiB and chunks of
// 10,000 bytes, a burst holds at most six, every stored message fits, and
// a handler writing faster than the stream stores waits for room.
func TestBurstBoundedByMaxPayload(t *testing.T) {
	t.Parallel()
	s := startSmallServer(t)
	const id = "bounded-1"
	hold, taken, release := holdFirst(id)
	piece := strings.Repeat("x", 10_000)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		for i := range 20 {
			if err := chunk(w, piece); err != nil {
				return err
			}
			if i == 0 {
				<-taken
			}
			if i == 4 {
				close(release) // frames 1…4 queued behind frame 0
			}
		}
		return w.Complete("done")
	})
	follow := followFrames(t, s.nc, id)
	startWorker(t, s.connect(t), "bounded", h, agent.WithoutHeartbeats(), hold)
	waitConsumer(t, s.js, "bounded")
	publish(t, s.js, "bounded", request(id, nil))
	fr, sizes := follow()
	if len(fr) != 21 {
		t.Fatalf("%d frames, want 21", len(fr))
	}
	for i, size := range sizes {
		if size > smallPayload {
			t.Fatalf("frame %d stored in a message of %d bytes > max_payload %d", i, size, smallPayload)
		}
	}
	_, msgs := storedFrames(t, s.nc, id)
	counts := frameCounts(t, msgs)
	for _, n := range counts {
		if n > 6 {
			t.Fatalf("frames per stored message %v: a burst of %d chunks of 10,000 bytes exceeds 64 KiB", counts, n)
		}
	}
	if counts[0] != 1 || len(counts) < 2 || counts[1] < 4 {
		t.Fatalf("frames per stored message %v, want frame 0 alone, then a burst of at least 4", counts)
	}
}

// resumeBursts writes chunks "0"…"5" from after its ResumeAfter, then the
// final frame; a first delivery waits for taken after chunk 0 and holds
// after chunk 2 (closing held) until its context ends.
type resumeBursts struct{ taken, held chan struct{} }

func (resumeBursts) Resumable() bool { return true }

func (h resumeBursts) Serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	for i := int64(0); i < 6; i++ {
		if i <= w.ResumeAfter() {
			continue
		}
		if err := chunk(w, fmt.Sprint(i)); err != nil {
			return err
		}
		if i == 0 && w.ResumeAfter() < 0 {
			<-h.taken
		}
		if i == 2 && w.ResumeAfter() < 0 {
			close(h.held)
			<-ctx.Done()
			return ctx.Err()
		}
	}
	return w.Complete("done")
}

// A redelivery resumes after the last frame of the last stored message, a
// burst here: the first worker stored frame 0 alone and frames 1–2 as a
// burst before it crashed; the second writes from frame 3 on.
func TestRedeliveryResumesAfterBurst(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const id = "resume-burst-1"
	env := request(id, nil)
	hold, taken, release := holdFirst(id)
	first := resumeBursts{taken: taken, held: make(chan struct{})}
	nc := s.connect(t)
	w := startWorker(t, nc, "rburst", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, wr agent.Writer) error {
		go func() { <-first.held; close(release) }()
		return first.Serve(ctx, env, wr)
	}), agent.WithAckWait(time.Second), agent.WithResumable(true), hold)
	waitConsumer(t, s.js, "rburst")
	publish(t, s.js, "rburst", env)
	waitFrames(t, s, id, 3)
	nc.Close()
	_ = w.stop()
	_, msgs := storedFrames(t, s.nc, id)
	if counts := frameCounts(t, msgs); len(counts) != 2 || counts[1] != 2 {
		t.Fatalf("frames per stored message %v before the crash, want [1 2]", counts)
	}
	startWorker(t, s.connect(t), "rburst", resumeBursts{}, agent.WithAckWait(time.Second))
	fr := waitFinal(t, s.nc, id, 15*time.Second)
	if len(fr) != 7 || text(t, fr) != "012345" {
		t.Fatalf("%d frames %q, want 012345 and the final", len(fr), text(t, fr))
	}
}

// A request handed back at shutdown while its final frame waits behind a
// message in flight drops the frames not yet sent: the handler's Complete
// returns (with the shutdown) instead of waiting for a frame that will
// never be stored, and only what was sent is stored.
func TestHandBackDropsQueuedFinal(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const id = "dropfinal-1"
	hold, taken, release := holdFirst(id)
	completed := make(chan error, 1)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := chunk(w, "a"); err != nil {
			return err
		}
		<-taken // frame 0 is in flight, held
		err := w.Complete("done")
		completed <- err
		return err
	})
	w := startWorker(t, s.connect(t), "dropfinal", h, agent.WithDrainTimeout(100*time.Millisecond),
		agent.WithAckWait(30*time.Second), hold)
	waitConsumer(t, s.js, "dropfinal")
	publish(t, s.js, "dropfinal", request(id, nil))
	<-taken
	stopped := make(chan error, 1)
	go func() { stopped <- w.stop() }()
	err := testkit.Receive(t, completed, 10*time.Second, "Complete still waits for a final frame the hand-back dropped")
	if err == nil {
		t.Fatal("Complete returned nil: the dropped final frame was reported stored")
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("Run: %v", err)
	}
	fr, _ := storedFrames(t, s.nc, id)
	if len(fr) != 1 || text(t, fr) != "a" {
		t.Fatalf("stored %d frames %q, want frame 0 alone", len(fr), text(t, fr))
	}
}

// A burst holds at most 256 frames: with frame 0 held in flight, chunks
// 1…256 fill the queued burst, and chunk 257 waits until that burst is
// taken, then starts the next one.
func TestBurstBoundedByFrames(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const id = "manyframes-1"
	hold, taken, release := holdFirst(id)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		for i := range 300 {
			if i == 257 {
				close(release) // chunks 1…256 are queued: the burst is full
			}
			if err := chunk(w, "x"); err != nil {
				return err
			}
			if i == 0 {
				<-taken
			}
		}
		return w.Complete("done")
	})
	startWorker(t, s.connect(t), "manyframes", h, agent.WithoutHeartbeats(), hold)
	waitConsumer(t, s.js, "manyframes")
	publish(t, s.js, "manyframes", request(id, nil))
	fr := waitFinal(t, s.nc, id, 20*time.Second)
	if len(fr) != 301 {
		t.Fatalf("%d frames, want 301", len(fr))
	}
	_, msgs := storedFrames(t, s.nc, id)
	counts := frameCounts(t, msgs)
	if len(counts) < 3 || counts[0] != 1 || counts[1] != 256 {
		t.Fatalf("frames per stored message %v, want 1, then 256, then the rest", counts)
	}
}

// Text deltas coalescing while a message is in flight are stored with the
// frame written after them, in one burst, not as a message of their own:
// a model's first delta goes alone, the deltas written while it is stored
// and the final frame share the second message ([1 1 1] before). A tool
// delta after pending text is queued behind it the same way (its Chunk
// waits for its store, so the final frame follows alone: [1 1 1 1]
// before). The text, its order and the frames' sequences are unchanged.
func TestCoalescedTextJoinsNextBurst(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for _, tc := range []struct {
		id     string
		tool   bool // a tool delta (a frame of its own) after the text
		counts []int
	}{
		{"joins-final", false, []int{1, 2}},
		{"joins-tool", true, []int{1, 2, 1}},
	} {
		hold, taken, release := holdFirst(tc.id)
		// "a"'s publish is released once the next write waits behind it.
		var once sync.Once
		waiting := agent.WithEnqueueWait(func(id string) {
			if id == tc.id {
				once.Do(func() { close(release) })
			}
		})
		h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
			if err := w.Chunk(e2a.DeltaText, "a"); err != nil {
				return err
			}
			<-taken // "a" is being published alone
			for _, d := range []string{"b", "c", "d"} {
				if err := w.Chunk(e2a.DeltaText, d); err != nil {
					return err
				}
			}
			if tc.tool {
				if err := w.Chunk(e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionCall, ID: "c1", Name: "f", Args: "{}"}); err != nil {
					return err
				}
			}
			return w.Complete("done")
		})
		startWorker(t, s.connect(t), tc.id, h, agent.WithoutHeartbeats(), hold, waiting)
		waitConsumer(t, s.js, tc.id)
		publish(t, s.js, tc.id, request(tc.id, nil))
		fr := waitFinal(t, s.nc, tc.id, 10*time.Second)
		if want := len(tc.counts) + 1; len(fr) != want || text(t, fr) != "abcd" {
			t.Fatalf("%s: %d frames, text %q; want %d frames, abcd", tc.id, len(fr), text(t, fr), want)
		}
		for i, f := range fr {
			if f.Sequence != int64(i) {
				t.Fatalf("%s: frame %d has sequence %d", tc.id, i, f.Sequence)
			}
		}
		_, msgs := storedFrames(t, s.nc, tc.id)
		if got := frameCounts(t, msgs); fmt.Sprint(got) != fmt.Sprint(tc.counts) {
			t.Fatalf("%s: frames per stored message %v, want %v", tc.id, got, tc.counts)
		}
	}
}
