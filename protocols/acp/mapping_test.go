package acp

import (
	"encoding/json"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

func TestE2AResponseToACPJSONRPCResponse(t *testing.T) {
	mk := func(kind, status string, body any) *e2a.Response {
		r := conformance.Frame("r", 3, kind, status, true, body, nil)
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
	if _, ok := E2AResponseToACPJSONRPCResponse(conformance.Chunk("r", 0, e2a.DeltaText, "x", "")); ok {
		t.Error("a chunk has no JSON-RPC response")
	}
}
