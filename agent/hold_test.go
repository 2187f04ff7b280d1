package agent_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// agent.Hold: text written while the handler holds is not published alone
// (an answer at hand is stored with its final frame: one message), and
// Hold(false) publishes it at once (a handler about to wait for its
// upstream shows what it has).
func TestHoldKeepsTextForTheNextWrite(t *testing.T) {
	t.Parallel()
	s := startServer(t)

	const held = "hold-held"
	startWorker(t, s.connect(t), held, agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		agent.Hold(w, true)
		for _, d := range []string{"a", "b", "c"} {
			if err := w.Chunk(e2a.DeltaText, d); err != nil {
				return err
			}
		}
		return w.Complete("done")
	}), agent.WithoutHeartbeats())
	waitConsumer(t, s.js, held)
	publish(t, s.js, held, request(held, nil))
	if fr := waitFinal(t, s.nc, held, 10*time.Second); text(t, fr) != "abc" {
		t.Fatalf("held: text %q", text(t, fr))
	}
	if _, msgs := storedFrames(t, s.nc, held); fmt.Sprint(frameCounts(t, msgs)) != "[2]" {
		t.Fatalf("held: frames per stored message %v, want [2] (the text with the final frame)", frameCounts(t, msgs))
	}

	const released = "hold-released"
	hook, taken, release := holdFirst(released)
	// "a"'s publish is let go once the final frame waits behind it: "b",
	// written meanwhile, then goes with the final frame (a release before
	// that would let "b" go alone: [1 1 1], seen in CI).
	var once sync.Once
	waiting := agent.WithEnqueueWait(func(id string) {
		if id == released {
			once.Do(func() { close(release) })
		}
	})
	startWorker(t, s.connect(t), released, agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		agent.Hold(w, true)
		if err := w.Chunk(e2a.DeltaText, "a"); err != nil {
			return err
		}
		agent.Hold(w, false)
		select { // published without another write
		case <-taken:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := w.Chunk(e2a.DeltaText, "b"); err != nil {
			return err
		}
		return w.Complete("done")
	}), agent.WithoutHeartbeats(), hook, waiting)
	waitConsumer(t, s.js, released)
	publish(t, s.js, released, request(released, nil))
	if fr := waitFinal(t, s.nc, released, 10*time.Second); text(t, fr) != "ab" {
		t.Fatalf("released: text %q", text(t, fr))
	}
	if _, msgs := storedFrames(t, s.nc, released); fmt.Sprint(frameCounts(t, msgs)) != "[1 2]" {
		t.Fatalf("released: frames per stored message %v, want [1 2]", frameCounts(t, msgs))
	}
}
