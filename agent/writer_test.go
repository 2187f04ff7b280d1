package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// checkRetryAndFence: the same frame published twice (a retry after a lost
// ack) is stored once and reported at its stream sequence; another writer's
// frame for the same sequence is fenced out, and so is a writer that expects
// an older last sequence.
func checkRetryAndFence(t *testing.T, js jetstream.JetStream, id string) {
	t.Helper()
	frame := func(seq int, who string) []byte {
		return []byte(fmt.Sprintf(`{"protocol_version":"1.0","response_id":"%s-%d","request_id":"%s","sequence":%d,"is_final":false,"status":"in_progress","response_kind":"e2a.chunk","timestamp":"2026-01-01T00:00:00+00:00","provenance":{"source_protocol":"e2a"},"body":{"delta_kind":"text","delta":"%s"}}`, who, seq, id, seq, who))
	}
	s0, err := agent.PublishRaw(js, id, 0, 0, frame(0, "a"))
	if err != nil {
		t.Fatalf("frame 0: %v", err)
	}
	again, err := agent.PublishRaw(js, id, 0, 0, frame(0, "a"))
	if err != nil || again != s0 {
		t.Fatalf("retried frame 0: seq %d err %v, want seq %d", again, err, s0)
	}
	if _, err := agent.PublishRaw(js, id, 0, 0, frame(0, "zombie")); !errors.Is(err, agent.ErrFenced) {
		t.Fatalf("another writer's frame 0: %v, want ErrFenced", err)
	}
	s1, err := agent.PublishRaw(js, id, 1, s0, frame(1, "a"))
	if err != nil {
		t.Fatalf("frame 1: %v", err)
	}
	if _, err := agent.PublishRaw(js, id, 1, s0, frame(1, "zombie")); !errors.Is(err, agent.ErrFenced) {
		t.Fatalf("zombie frame 1: %v, want ErrFenced", err)
	}
	if _, err := agent.PublishRaw(js, id, 2, s0, frame(2, "zombie")); !errors.Is(err, agent.ErrFenced) {
		t.Fatalf("zombie frame 2 after frame 0: %v, want ErrFenced", err)
	}
	if again, err := agent.PublishRaw(js, id, 1, s0, frame(1, "a")); err != nil || again != s1 {
		t.Fatalf("retried frame 1: seq %d err %v, want %d", again, err, s1)
	}
	subj, _ := subjects.Response(id)
	msgs, err := streams.DirectGetAll(context.Background(), js.Conn(), streams.ResponsesStream, subj, 0, 16)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || !strings.Contains(string(msgs[0].Data), `"a"`) || !strings.Contains(string(msgs[1].Data), `"a"`) {
		t.Fatalf("stored %d frames, want exactly a's 0 and 1", len(msgs))
	}
}

// Point 2 (single server): retries are deduplicated, zombies fenced.
func TestPublishRetryDeduplicatedAndZombieFenced(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	checkRetryAndFence(t, s.js, "fence-1")
	checkRetryAndFence(t, s.js, "a hostile.id *>")
}

// Point 2: a worker whose delivery was redelivered elsewhere (it stalled
// without heartbeats) is fenced out when it writes again: its write fails
// with ErrFenced (a write sent in a batch: its context is cancelled when the
// server refuses it, and the next write fails), its context is cancelled
// with that cause, and the response subject holds one gapless sequence
// written by the new owner after it.
func TestZombieWorkerFencedOut(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	release := make(chan struct{})
	zombieErr := make(chan error, 1)
	zombieCause := make(chan error, 1)
	zombie := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Write(e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: "text", Delta: "a0"}, false); err != nil {
			return err
		}
		<-release
		err := w.Write(e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: "text", Delta: "a1"}, false)
		if err == nil {
			// Sent in a batch: the server's refusal cancels the context,
			// and the next write reports it.
			<-ctx.Done()
			err = w.Write(e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: "text", Delta: "a2"}, false)
		}
		zombieErr <- err
		<-ctx.Done()
		zombieCause <- context.Cause(ctx)
		return err
	})
	var resumedAfter atomic.Int64
	owner := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		resumedAfter.Store(w.ResumeAfter())
		if err := w.Write(e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: "text", Delta: "b1"}, false); err != nil {
			return err
		}
		return w.Complete("b")
	})
	zreg := prometheus.NewRegistry()
	startWorker(t, s.connect(t), "zomb", zombie, agent.WithConcurrency(1), agent.WithAckWait(time.Second),
		agent.WithoutHeartbeats(), agent.WithMetrics(zreg))
	waitConsumer(t, s.js, "zomb")
	publish(t, s.js, "zomb", request("zomb-1", nil))
	waitFrames(t, s, "zomb-1", 1)
	startWorker(t, s.connect(t), "zomb", owner, agent.WithAckWait(time.Second), agent.WithResumable(true))
	fr := waitFinal(t, s.nc, "zomb-1", 10*time.Second)
	close(release)
	if err := <-zombieErr; !errors.Is(err, agent.ErrFenced) {
		t.Fatalf("zombie write: %v, want ErrFenced", err)
	}
	if c := <-zombieCause; !errors.Is(c, agent.ErrFenced) {
		t.Fatalf("zombie context cause %v, want ErrFenced", c)
	}
	if resumedAfter.Load() != 0 {
		t.Errorf("owner resumed after %d, want 0", resumedAfter.Load())
	}
	fr2, _ := storedFrames(t, s.nc, "zomb-1")
	if len(fr) != 3 || len(fr2) != 3 || text(t, fr2) != "a0b1" {
		t.Fatalf("frames %d/%d text %q, want 3 frames a0 b1 final", len(fr), len(fr2), text(t, fr2))
	}
	waitMetric(t, zreg, "e2a_agent_requests_handled_total", map[string]string{"outcome": agent.OutcomeFenced}, 1)
}

func waitFrames(t testing.TB, s *server, id string, n int) []*e2a.Response {
	t.Helper()
	var fr []*e2a.Response
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d frames of %s", n, id), func() bool {
		fr, _ = storedFrames(t, s.nc, id)
		return len(fr) >= n
	})
	return fr
}

// Point 2: a producer faster than the stream gets its text deltas coalesced
// into fewer frames, bounded in bytes, in order, without losing a byte;
// reasoning and text are never merged; coalescing off gives one frame per
// Chunk; maxDelay gathers deltas that trickle in.
func TestCoalescing(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const deltas = 3000
	var want strings.Builder
	for i := range deltas {
		fmt.Fprintf(&want, "t%04d ", i)
	}
	fast := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Chunk(e2a.DeltaReasoning, "thinking "); err != nil {
			return err
		}
		if err := w.Chunk(e2a.DeltaReasoning, "more"); err != nil {
			return err
		}
		for i := range deltas {
			if err := w.Chunk(e2a.DeltaText, fmt.Sprintf("t%04d ", i)); err != nil {
				return err
			}
		}
		return w.Complete(nil)
	})
	trickle := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		for i := range 10 {
			if err := w.Chunk(e2a.DeltaText, fmt.Sprintf("%d", i)); err != nil {
				return err
			}
			time.Sleep(time.Millisecond) // the behaviour: chunks spread over time, for the linger
		}
		return w.Complete(nil)
	})
	startWorker(t, s.connect(t), "coal", fast)
	startWorker(t, s.connect(t), "coalsmall", fast, agent.WithCoalesce(100, 0))
	startWorker(t, s.connect(t), "nocoal", fast, agent.WithCoalesce(0, 0))
	startWorker(t, s.connect(t), "linger", trickle, agent.WithCoalesce(1<<20, 50*time.Millisecond))
	for _, p := range []string{"coal", "coalsmall", "nocoal", "linger"} {
		waitConsumer(t, s.js, p)
		publish(t, s.js, p, request(p+"-1", nil))
	}
	// check returns the number of text frames. The wait is a bound for a
	// failure only: 3,000 frames one by one under -race on a loaded
	// machine took over 30 s (CI1 of 876df57).
	check := func(id string, maxDelta int) int {
		fr := waitFinal(t, s.nc, id, 120*time.Second)
		if got := text(t, fr); got != want.String() {
			t.Fatalf("%s: text differs (%d vs %d bytes)", id, len(got), want.Len())
		}
		var reasoning string
		texts := 0
		for _, f := range fr[:len(fr)-1] {
			c, _ := f.Chunk()
			d := c.Delta.(string)
			switch {
			case c.DeltaKind == e2a.DeltaReasoning && texts == 0:
				reasoning += d
			case c.DeltaKind == e2a.DeltaText:
				texts++
				if len(d) > maxDelta {
					t.Fatalf("%s: frame %d has %d bytes (max %d)", id, f.Sequence, len(d), maxDelta)
				}
			default:
				t.Fatalf("%s: frame %d: %s delta out of order", id, f.Sequence, c.DeltaKind)
			}
		}
		if reasoning != "thinking more" {
			t.Errorf("%s: reasoning %q", id, reasoning)
		}
		return texts
	}
	n := check("coal-1", agent.DefaultCoalesceBytes)
	t.Logf("coalescing: %d text deltas → %d frames (ratio %.1f)", deltas, n, float64(deltas)/float64(n))
	if n >= deltas/2 {
		t.Errorf("%d frames for %d fast deltas: not coalesced", n, deltas)
	}
	n = check("coalsmall-1", 100)
	t.Logf("coalescing ≤100 B: %d text deltas → %d frames", deltas, n)
	if n < deltas*6/100 {
		t.Errorf("%d frames of ≤ 100 B for %d bytes", n, deltas*6)
	}
	if n := check("nocoal-1", 6); n != deltas {
		t.Errorf("coalescing off: %d text frames, want %d", n, deltas)
	}
	fr := waitFinal(t, s.nc, "linger-1", 10*time.Second)
	if text(t, fr) != "0123456789" || len(fr) > 4 {
		t.Errorf("linger: %d frames, text %q; want ≤ 3 chunk frames", len(fr), text(t, fr))
	}
}
