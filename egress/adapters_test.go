package egress

import (
	"encoding/json"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
)

func TestE2AResponseToACPJSONRPCResponse(t *testing.T) {
	mk := func(kind, status string, body any) *e2a.Response {
		r := frameAt("r", 3, kind, status, true, body, nil)
		r.JSONRPCID = json.RawMessage(`42`)
		return r
	}
	for _, tc := range []struct {
		name string
		r    *e2a.Response
		want string
	}{
		{"prompt_result", mk(e2a.KindACPPromptRes, e2a.StatusSucceeded, map[string]any{"stop_reason": "max_tokens", "usage": map[string]any{"total": 3}}),
			`{"jsonrpc":"2.0","id":42,"result":{"stopReason":"max_tokens","usage":{"total":3}}}`},
		{"jsonrpc_error", mk(e2a.KindACPJSONRPCErr, e2a.StatusFailed, map[string]any{"code": -32602, "message": "bad prompt"}),
			`{"jsonrpc":"2.0","id":42,"error":{"code":-32602,"message":"bad prompt"}}`},
		{"e2a_error", mk(e2a.KindError, e2a.StatusFailed, e2a.ErrorBody{Code: "handler_error", Message: "boom", Retryable: true}),
			`{"jsonrpc":"2.0","id":42,"error":{"code":-32603,"message":"boom","data":{"code":"handler_error","retryable":true}}}`},
		{"e2a_error_external", mk(e2a.KindError, e2a.StatusFailed, e2a.ErrorBody{Code: "x", Message: "m", External: map[string]any{"protocol": "acp", "code": -32000, "message": "auth required"}}),
			`{"jsonrpc":"2.0","id":42,"error":{"code":-32000,"message":"auth required"}}`},
	} {
		got, ok := E2AResponseToACPJSONRPCResponse(tc.r)
		if !ok {
			t.Fatalf("%s: not applicable", tc.name)
		}
		b, _ := json.Marshal(got)
		if string(b) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, b, tc.want)
		}
	}
	if _, ok := E2AResponseToACPJSONRPCResponse(chunkFrame("r", 0, e2a.DeltaText, "x", "")); ok {
		t.Error("a chunk has no JSON-RPC response")
	}
}

func TestE2AResponseToA2AStreamPayload(t *testing.T) {
	r := frameAt("r", 0, e2a.KindA2AStreamEvent, e2a.StatusInProgress, false, e2a.StreamEventBody{Branch: e2a.BranchStatusUpdate,
		Payload: map[string]any{"task_id": "t", "status": map[string]any{"state": "TASK_STATE_WORKING"}}}, nil)
	got, ok := E2AResponseToA2AStreamPayload(r)
	if !ok || len(got) != 1 || got[e2a.BranchStatusUpdate] == nil {
		t.Fatalf("%v %v", got, ok)
	}
	if _, ok := E2AResponseToA2AStreamPayload(chunkFrame("r", 0, e2a.DeltaText, "x", "")); ok {
		t.Error("a chunk is not a stream payload")
	}
	// Projections are filled on request and do not change the frame.
	p := FillProjections(r)
	if p.Projections["a2a"] == nil || r.Projections != nil {
		t.Fatalf("projections %v / original %v", p.Projections, r.Projections)
	}
	c := FillProjections(chunkFrame("r", 0, e2a.DeltaText, "x", ""))
	acpProj, _ := c.Projections["acp"].(map[string]any)
	if acpProj["method"] != "session/update" {
		t.Fatalf("acp projection %v", c.Projections)
	}
}

func TestBuildA2ATaskAcrossRequests(t *testing.T) {
	env1 := &e2a.Envelope{RequestID: "q1", Params: map[string]any{"text": "first"}}
	env2 := &e2a.Envelope{RequestID: "q2", MessageID: "u2", Params: map[string]any{"message": map[string]any{
		"message_id": "u2", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "second"}}}}}
	f1 := []*e2a.Response{chunkFrame("q1", 0, e2a.DeltaText, "one", ""), frameAt("q1", 1, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: "one"}, nil)}
	f2 := []*e2a.Response{chunkFrame("q2", 0, e2a.DeltaText, "two", "")}
	task := BuildA2ATask("task-1", "ctx-1", []A2ARequest{{Envelope: env1, Frames: f1}, {Envelope: env2, Frames: f2}}, nil)
	if task.Status.State != "working" || len(task.History) != 4 {
		t.Fatalf("task %+v", task)
	}
	if task.History[2].ID != "u2" || task.History[2].Role != "user" {
		t.Fatalf("user message %+v", task.History[2])
	}
	one := 1
	got := BuildA2ATask("task-1", "ctx-1", []A2ARequest{{Envelope: env1, Frames: f1}}, &one)
	if len(got.History) != 1 || got.Status.State != "completed" || len(got.Artifacts) != 1 {
		t.Fatalf("finished task %+v", got)
	}
	// Every message keeps its text (the aggregate is sealed).
	if len(got.Artifacts[0].Parts) != 1 || got.Artifacts[0].Parts[0].(a2a.TextPart).Text != "one" {
		t.Fatalf("artifact parts %+v", got.Artifacts[0].Parts)
	}
	if len(task.History[1].Parts) == 0 {
		t.Fatalf("earlier reply without parts: %+v", task.History[1])
	}
}
