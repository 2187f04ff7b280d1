package demo_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestDemoAsk: params.ask, the A2A metadata's ask or a text prefix makes
// the demo stream a reasoning and a text chunk, then end its turn with
// agent.Interrupt's frame (a final a2a.stream_event status_update in the
// state asked, with the question); a resumed run writes exactly the tail.
func TestDemoAsk(t *testing.T) {
	withMeta := &e2a.Envelope{RequestID: "r1", Params: map[string]any{"text": "the weather"}, A2AMetadata: map[string]any{"ask": "auth"}}
	for _, c := range []struct {
		env          *e2a.Envelope
		state, topic string
	}{
		{env(map[string]any{"text": "ask:input the weather"}), e2a.StateInputRequired, "the weather"},
		{env(map[string]any{"text": "ask:auth  the weather "}), e2a.StateAuthRequired, "the weather"},
		{env(map[string]any{"text": "the weather", "ask": "input"}), e2a.StateInputRequired, "the weather"},
		{withMeta, e2a.StateAuthRequired, "the weather"},
		{env(map[string]any{"prompt": []any{map[string]any{"type": "text", "text": "ask:input"}}}), e2a.StateInputRequired, ""},
	} {
		state, topic := demo.Ask(c.env)
		if state != c.state || topic != c.topic {
			t.Fatalf("Ask(%v) = %q %q, want %q %q", c.env.Params, state, topic, c.state, c.topic)
		}
		full := run(t, demo.New(), c.env, -1)
		if len(full) != 3 || !strings.Contains(full[0], `"delta_kind":"reasoning"`) || !strings.Contains(full[1], `"delta_kind":"text"`) {
			t.Fatalf("frames %v", full)
		}
		// The final frame is the interrupt, read back by its one reader.
		parts := strings.SplitN(full[2], " ", 3)
		body := strings.TrimSuffix(parts[2], " final")
		r := &e2a.Response{ResponseKind: parts[0], Status: parts[1], IsFinal: strings.HasSuffix(full[2], " final"), Body: []byte(body)}
		st, text, ok := r.Interrupt()
		if !ok || st != c.state || text != demo.Question(c.state, c.topic) || r.ResponseKind != e2a.KindA2AStreamEvent || r.Status != e2a.StatusSucceeded {
			t.Fatalf("final %s: %q %q %v", full[2], st, text, ok)
		}
		for k := int64(0); k < 2; k++ {
			if tail := run(t, demo.New(), c.env, k); !reflect.DeepEqual(tail, full[k+1:]) {
				t.Fatalf("resumed after %d: %v, want %v", k, tail, full[k+1:])
			}
		}
	}
	// Not asking: the usual reply (a continuation's answer, a text that
	// only mentions the prefix, an unknown ask).
	for _, p := range []map[string]any{{"text": "Paris"}, {"text": "say ask:input"}, {"text": "x", "ask": "maybe"}} {
		if state, _ := demo.Ask(env(p)); state != "" {
			t.Fatalf("Ask(%v) = %q", p, state)
		}
		fr := run(t, demo.New(), env(p), -1)
		if !strings.Contains(fr[len(fr)-1], `"content":"You said: `) {
			t.Fatalf("%v: final %s", p, fr[len(fr)-1])
		}
	}
}
