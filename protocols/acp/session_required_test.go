package acp_test

import (
	"testing"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// TestSessionIDRequiredAnswers: a pass-through method whose schema
// requires a sessionId (document/*, nes/*) is answered -32602 without one
// or with one that is not a string, and nothing is published: a sessionId
// of 7 skipped the front door's check of the caller's session and went to
// the pool. The session methods the pipeline does not implement stay
// -32601 whatever their params.
func TestSessionIDRequiredAnswers(t *testing.T) {
	h := newHost()
	for _, c := range []struct {
		method string
		params map[string]any
		code   int
	}{
		{"document/didOpen", map[string]any{"uri": "file:///a", "languageId": "go", "version": 1, "text": ""}, jsonrpc.CodeInvalidParams},
		{"document/didOpen", map[string]any{"sessionId": 7, "uri": "file:///a"}, jsonrpc.CodeInvalidParams},
		{"nes/suggest", map[string]any{"sessionId": ""}, jsonrpc.CodeInvalidParams},
		{"_vendor/x", map[string]any{"sessionId": []any{"s1"}}, jsonrpc.CodeInvalidParams},
		{"session/set_model", map[string]any{"modelId": "m"}, jsonrpc.CodeMethodNotFound},
		{"session/set_config_option", map[string]any{"sessionId": 7}, jsonrpc.CodeMethodNotFound},
		{"session/close", map[string]any{}, jsonrpc.CodeMethodNotFound},
		{"session/fork", map[string]any{"cwd": "/w"}, jsonrpc.CodeMethodNotFound},
		{"session/resume", map[string]any{"sessionId": nil}, jsonrpc.CodeMethodNotFound},
	} {
		if r := call(t, h, c.method, c.params); r.err == nil || r.err.Code != c.code {
			t.Errorf("%s %v: %+v, want error %d", c.method, c.params, r, c.code)
		}
	}
	if pub := h.Published(); len(pub) != 0 {
		t.Errorf("published %d requests", len(pub))
	}
}
