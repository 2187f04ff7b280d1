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
