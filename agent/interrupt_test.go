package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestInterrupt: through the runtime on JetStream, agent.Interrupt writes
// the request's final frame (an a2a.stream_event, status succeeded, that
// Response.Interrupt reads back with the state and the text); a state
// that is not an interrupt writes nothing and returns the agent error the
// runtime ends the request with (invalid_interrupt).
func TestInterrupt(t *testing.T) {
	s := startServer(t)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Chunk(e2a.DeltaText, "one moment"); err != nil {
			return err
		}
		return agent.Interrupt(w, env.ParamString("state"), "Which city?")
	})
	startWorker(t, s.nc, "ask", h)
	publish(t, s.js, "ask", request("int-1", map[string]any{"state": e2a.StateInputRequired}))
	publish(t, s.js, "ask", request("int-2", map[string]any{"state": "completed"}))

	fr := waitFinal(t, s.nc, "int-1", 20*time.Second)
	last := fr[len(fr)-1]
	if st, text, ok := last.Interrupt(); !ok || st != e2a.StateInputRequired || text != "Which city?" ||
		last.ResponseKind != e2a.KindA2AStreamEvent || last.Status != e2a.StatusSucceeded || len(fr) != 2 {
		t.Fatalf("frames %+v: %q %q %v", fr, st, text, ok)
	}
	fr = waitFinal(t, s.nc, "int-2", 20*time.Second)
	b, err := fr[len(fr)-1].Error()
	if err != nil || b.Code != "invalid_interrupt" || b.Retryable || len(fr) != 2 {
		t.Fatalf("an invalid state: %+v %v", fr, err)
	}
	if _, _, ok := fr[len(fr)-1].Interrupt(); ok {
		t.Fatal("an error frame read as an interrupt")
	}
}
