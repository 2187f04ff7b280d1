package acp

import (
	"encoding/json"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

// specStopReasons are ACP's StopReason values (schema: an enum of five);
// clients built on the schema (the Rust and TypeScript SDKs) refuse any
// other value in a session/prompt result.
var specStopReasons = map[acpsdk.StopReason]bool{
	acpsdk.StopReasonEndTurn: true, acpsdk.StopReasonMaxTokens: true, acpsdk.StopReasonMaxTurnRequests: true,
	acpsdk.StopReasonRefusal: true, acpsdk.StopReasonCancelled: true,
}

// promptResult decodes the session/prompt result of resp (fails on an error).
func promptResult(t *testing.T, name string, r *e2a.Response) (acpsdk.PromptResponse, bool) {
	t.Helper()
	resp := Final(r, json.RawMessage(`7`))
	if resp.Error != nil {
		return acpsdk.PromptResponse{}, false
	}
	b, _ := json.Marshal(resp.Result)
	var pr acpsdk.PromptResponse
	if err := json.Unmarshal(b, &pr); err != nil {
		t.Fatalf("%s: result %s: %v", name, b, err)
	}
	return pr, true
}

// TestStopReasonInSpec: an agent's e2a.complete result that carries its
// model API's own stop reason (an Anthropic Messages result: stop_reason
// "tool_use" or "stop_sequence"; a generic "stop") ends the prompt with
// one of ACP's StopReason values. It was passed through, a value
// schema-checking clients (the Rust and TypeScript SDKs) refuse.
func TestStopReasonInSpec(t *testing.T) {
	for _, sr := range []string{"tool_use", "stop_sequence", "stop"} {
		r := conformance.Frame("r", 3, e2a.KindComplete, e2a.StatusSucceeded, true,
			e2a.CompleteBody{Result: map[string]any{"type": "message", "stop_reason": sr, "content": []any{}}}, nil)
		pr, ok := promptResult(t, sr, r)
		if ok && !specStopReasons[pr.StopReason] {
			t.Errorf("result stop_reason %q: session/prompt answered stopReason %q, not one of ACP's", sr, pr.StopReason)
		}
	}
}

// TestAgentTerminalA2AState: an agent's own final A2A status (an HTTP
// agent wrapping an A2A framework writes a final a2a.stream_event
// status_update or a2a.task) in state failed, rejected or canceled ends
// the ACP prompt as its A2A task ends: an error, refusal, cancelled. All
// were a normal end_turn: an editor showed a failed turn as completed.
func TestAgentTerminalA2AState(t *testing.T) {
	status := func(state string) map[string]any {
		return map[string]any{"state": state, "message": map[string]any{"kind": "message", "role": "agent", "messageId": "m1",
			"parts": []any{map[string]any{"kind": "text", "text": "the upstream failed"}}}}
	}
	event := func(state string) *e2a.Response {
		return conformance.Frame("r", 2, e2a.KindA2AStreamEvent, e2a.StatusSucceeded, true,
			map[string]any{"branch": e2a.BranchStatusUpdate, "payload": map[string]any{"kind": "status-update",
				"taskId": "t1", "contextId": "c1", "status": status(state), "final": true}}, nil)
	}
	task := func(state string) *e2a.Response {
		return conformance.Frame("r", 2, e2a.KindA2ATask, e2a.StatusSucceeded, true,
			map[string]any{"kind": "task", "id": "t1", "contextId": "c1", "status": status(state)}, nil)
	}
	for _, tc := range []struct {
		name string
		r    *e2a.Response
		want acpsdk.StopReason // "" : a JSON-RPC error
	}{
		{"status_update failed", event("failed"), ""},
		{"status_update rejected", event("rejected"), acpsdk.StopReasonRefusal},
		{"status_update canceled", event("canceled"), acpsdk.StopReasonCancelled},
		{"task failed", task("failed"), ""},
	} {
		pr, ok := promptResult(t, tc.name, tc.r)
		switch {
		case tc.want == "" && ok:
			t.Errorf("%s: answered stopReason %q, want a JSON-RPC error (the A2A task failed)", tc.name, pr.StopReason)
		case tc.want != "" && (!ok || pr.StopReason != tc.want):
			t.Errorf("%s: answered stopReason %q (ok %v), want %q", tc.name, pr.StopReason, ok, tc.want)
		}
	}
}
