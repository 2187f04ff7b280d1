package agent_test

import (
	"context"
	"encoding/json"
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

// TestInterruptWithParts: agent.InterruptWithParts writes the agent's
// message with its extra parts after the text (a form to fill in), and a
// message of a form alone (no text) with that form; Response.Interrupt
// reads the state and the text back.
func TestInterruptWithParts(t *testing.T) {
	s := startServer(t)
	form := map[string]any{"kind": "data", "data": map[string]any{"slots": []any{"09:00", "10:00"}}}
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		return agent.InterruptWithParts(w, e2a.StateInputRequired, env.ParamString("text"), form)
	})
	startWorker(t, s.nc, "form", h)
	publish(t, s.js, "form", request("form-1", map[string]any{"text": "Pick a slot"}))
	publish(t, s.js, "form", request("form-2", map[string]any{}))

	for id, want := range map[string]string{"form-1": "Pick a slot", "form-2": ""} {
		fr := waitFinal(t, s.nc, id, 20*time.Second)
		last := fr[len(fr)-1]
		st, text, ok := last.Interrupt()
		if !ok || st != e2a.StateInputRequired || text != want || last.Status != e2a.StatusSucceeded {
			t.Fatalf("%s: %s %q %v (%s)", id, st, text, ok, last.Body)
		}
		var b struct {
			Payload struct {
				Status struct {
					Message e2a.InterruptMessage `json:"message"`
				} `json:"status"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(last.Body, &b); err != nil {
			t.Fatal(err)
		}
		parts := b.Payload.Status.Message.Parts
		if n := len(parts); n == 0 || parts[n-1]["kind"] != "data" || len(parts) != map[bool]int{true: 2, false: 1}[want != ""] {
			t.Errorf("%s: the message's parts %v, want the text (if any) then the form", id, parts)
		}
	}
}
