package e2a_test

import (
	"encoding/json"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestInterrupt: InterruptBody's frame is read back by Response.Interrupt
// (state, the text parts joined), as written and after a JSON round trip;
// the v1.0 and proto spellings of the state are read too, and a final
// a2a.task frame in an interrupted state; any other frame is not an
// interrupt.
func TestInterrupt(t *testing.T) {
	frame := func(kind, status string, final bool, body any) *e2a.Response {
		return &e2a.Response{ProtocolVersion: "1.0", ResponseID: "r1", RequestID: "q1", Sequence: 2, IsFinal: final,
			Status: status, ResponseKind: kind, Timestamp: "2026-03-28T14:00:00Z", Provenance: e2a.Provenance{SourceProtocol: e2a.SourceE2A},
			Body: e2a.MarshalBody(body)}
	}
	f := frame(e2a.KindA2AStreamEvent, e2a.StatusSucceeded, true,
		e2a.InterruptBody(e2a.StateAuthRequired, "Sign in", map[string]any{"kind": "data", "data": map[string]any{"form": 1}}, map[string]any{"kind": "text", "text": " please"}))
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	back, err := e2a.ResponseFromJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*e2a.Response{f, back} {
		if st, text, ok := r.Interrupt(); !ok || st != e2a.StateAuthRequired || text != "Sign in please" {
			t.Fatalf("Interrupt of %s: %q %q %v", b, st, text, ok)
		}
	}
	if st, text, ok := frame(e2a.KindA2AStreamEvent, e2a.StatusSucceeded, true, e2a.InterruptBody(e2a.StateInputRequired, "")).Interrupt(); !ok || st != e2a.StateInputRequired || text != "" {
		t.Fatalf("no message: %q %q %v", st, text, ok)
	}
	for _, s := range []string{"TASK_STATE_INPUT_REQUIRED", "input_required"} {
		body := map[string]any{"branch": "status_update", "payload": map[string]any{"status": map[string]any{"state": s,
			"message": map[string]any{"role": "ROLE_AGENT", "parts": []any{map[string]any{"text": "Which city?"}}}}}}
		if st, text, ok := frame(e2a.KindA2AStreamEvent, e2a.StatusSucceeded, true, body).Interrupt(); !ok || st != e2a.StateInputRequired || text != "Which city?" {
			t.Fatalf("%s: %q %q %v", s, st, text, ok)
		}
	}
	// A final a2a.task frame (v0.3 JSON or proto-aligned) in an interrupted state.
	for _, task := range []map[string]any{
		{"kind": "task", "id": "x", "contextId": "y", "status": map[string]any{"state": "input-required",
			"message": map[string]any{"kind": "message", "role": "agent", "parts": []any{map[string]any{"kind": "text", "text": "Which city?"}}}}},
		{"id": "x", "context_id": "y", "status": map[string]any{"state": "TASK_STATE_INPUT_REQUIRED",
			"message": map[string]any{"role": "ROLE_AGENT", "parts": []any{map[string]any{"text": "Which city?"}}}}},
	} {
		if st, text, ok := frame(e2a.KindA2ATask, e2a.StatusSucceeded, true, task).Interrupt(); !ok || st != e2a.StateInputRequired || text != "Which city?" {
			t.Fatalf("a2a.task %v: %q %q %v", task, st, text, ok)
		}
	}
	for name, r := range map[string]*e2a.Response{
		"task not final": frame(e2a.KindA2ATask, e2a.StatusInProgress, false, map[string]any{"status": map[string]any{"state": "input-required"}}),
		"task completed": frame(e2a.KindA2ATask, e2a.StatusSucceeded, true, map[string]any{"status": map[string]any{"state": "completed"}}),
		"task garbage":   {IsFinal: true, ResponseKind: e2a.KindA2ATask, Body: json.RawMessage(`[1,2`)},
		"message":        frame(e2a.KindA2AMessage, e2a.StatusSucceeded, true, map[string]any{"status": map[string]any{"state": "input-required"}}),
		"not final":      frame(e2a.KindA2AStreamEvent, e2a.StatusInProgress, false, e2a.InterruptBody(e2a.StateInputRequired, "q")),
		"completed":      frame(e2a.KindA2AStreamEvent, e2a.StatusSucceeded, true, map[string]any{"branch": "status_update", "payload": map[string]any{"status": map[string]any{"state": "completed"}}}),
		"artifact":       frame(e2a.KindA2AStreamEvent, e2a.StatusSucceeded, true, map[string]any{"branch": "artifact_update", "payload": map[string]any{"status": map[string]any{"state": "input-required"}}}),
		"complete":       frame(e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: "x"}),
		"garbage body":   {IsFinal: true, ResponseKind: e2a.KindA2AStreamEvent, Body: json.RawMessage(`[1,2`)},
		"payload array":  frame(e2a.KindA2AStreamEvent, e2a.StatusSucceeded, true, map[string]any{"branch": "status_update", "payload": []any{1}}),
		"nil":            nil,
	} {
		if st, _, ok := r.Interrupt(); ok || st != "" {
			t.Fatalf("%s: read as an interrupt (%q)", name, st)
		}
	}
	if e2a.InterruptState("completed") || !e2a.InterruptState(e2a.StateInputRequired) || !e2a.InterruptState(e2a.StateAuthRequired) {
		t.Fatal("InterruptState")
	}
}
