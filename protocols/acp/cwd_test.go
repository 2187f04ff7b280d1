package acp_test

import (
	"testing"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// TestSessionCwdAbsolute: ACP's session/new and session/load take a cwd
// that "must be an absolute path", and additional directories that must be
// too (POSIX "/…" or Windows "C:\…", "\\server\share"); a relative one
// is invalid params, as an agent cannot know what it is relative to. It
// was accepted and passed on to the agent as it was.
func TestSessionCwdAbsolute(t *testing.T) {
	h := newHost()
	for _, cwd := range []string{"/w", `C:\Users\me\repo`, `c:/repo`, `\\server\share\repo`} {
		if r := call(t, h, "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}); r.err != nil {
			t.Errorf("session/new cwd %q: %+v; want a session", cwd, r.err)
		}
	}
	for _, params := range []map[string]any{
		{"cwd": "repo", "mcpServers": []any{}},
		{"cwd": "./repo", "mcpServers": []any{}},
		{"cwd": "../x", "mcpServers": []any{}},
		{"cwd": `C:repo`, "mcpServers": []any{}},
		{"cwd": "/w", "mcpServers": []any{}, "additionalDirectories": []any{"/a", "b"}},
	} {
		if r := call(t, h, "session/new", params); r.err == nil || r.err.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("session/new %v: %+v; want invalid params", params, r)
		}
	}
	sn := call(t, h, "session/new", map[string]any{"cwd": "/w", "mcpServers": []any{}})
	id, _ := sn.result.(map[string]any)["sessionId"].(string)
	if r := call(t, h, "session/load", map[string]any{"sessionId": id, "cwd": "w", "mcpServers": []any{}}); r.err == nil || r.err.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("session/load with a relative cwd: %+v; want invalid params", r)
	}
}

// TestSessionConfigTypeErrorNamesField: a session/new or session/load
// param of the wrong JSON type is -32602 naming that param. An
// additionalDirectories that was not an array of strings was answered
// "cwd must be a string, mcpServers an array", naming two params that
// were right.
func TestSessionConfigTypeErrorNamesField(t *testing.T) {
	h := newHost()
	for _, c := range []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"cwd": "/w", "mcpServers": []any{}, "additionalDirectories": []any{1}}, "Invalid params: additionalDirectories must be an array of strings"},
		{map[string]any{"cwd": "/w", "mcpServers": []any{}, "additionalDirectories": "/a"}, "Invalid params: additionalDirectories must be an array of strings"},
		{map[string]any{"cwd": 7, "mcpServers": []any{}}, "Invalid params: cwd must be a string"},
		{map[string]any{"cwd": "/w", "mcpServers": "fs"}, "Invalid params: mcpServers must be an array"},
	} {
		r := call(t, h, "session/new", c.params)
		if r.err == nil || r.err.Code != jsonrpc.CodeInvalidParams || r.err.Message != c.want {
			t.Errorf("session/new %v: %+v; want -32602 %q", c.params, r.err, c.want)
		}
	}
}
