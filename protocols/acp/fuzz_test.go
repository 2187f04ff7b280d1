package acp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/acp"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// isACPMethod reports whether the front door answers name itself.
func isACPMethod(name string) bool {
	for _, m := range acp.Methods {
		if m.Name == name {
			return true
		}
	}
	return false
}

// FuzzCalls: whatever method and params an ACP client sends, in a session
// that exists (the params' "SESSION" is its id), the front door never
// panics, answers a method it answers itself exactly once (at most once
// otherwise), never with an internal error, with a result that encodes;
// it publishes at most one request, releases every stream slot it took,
// and a stream it writes is NDJSON of JSON-RPC messages. (An internal
// error is the kit host's answer for a request it published: it has no
// agent.)
func FuzzCalls(f *testing.F) {
	for _, s := range []struct{ method, params string }{
		{"initialize", `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}`},
		{"authenticate", `{"methodId":"apiKey"}`},
		{"authenticate", `{"methodId":"bearer"}`},
		{"logout", `{}`},
		{"session/new", `{"cwd":"/w","mcpServers":[{"name":"m","command":"x","args":[],"env":[{"name":"TOKEN","value":"secret"}]}]}`},
		{"session/load", `{"sessionId":"SESSION","cwd":"/w","mcpServers":[]}`},
		{"session/prompt", `{"sessionId":"SESSION","prompt":[{"type":"text","text":"hi"},{"type":"resource_link","uri":"file:///a","name":"a"}]}`},
		{"session/prompt", `{"sessionId":"nope","prompt":[]}`},
		{"session/cancel", `{"sessionId":"SESSION"}`},
		{"session/set_mode", `{"sessionId":"SESSION","modeId":"x"}`},
		{"_vendor/thing", `{"sessionId":"SESSION"}`},
		{"session/prompt", `null`},
	} {
		f.Add(s.method, []byte(s.params))
	}
	f.Fuzz(func(t *testing.T, method string, params []byte) {
		if !json.Valid(params) {
			return // the JSON-RPC decoder answers a parse error before any method runs
		}
		h := newHost()
		sn := call(t, h, "session/new", map[string]any{"cwd": "/w", "mcpServers": []any{}})
		id, _ := sn.result.(map[string]any)["sessionId"].(string)
		raw := bytes.ReplaceAll(params, []byte("SESSION"), []byte(id))
		rep := &reply{hdr: http.Header{}, stream: httptest.NewRecorder()}
		in := host.Call{Ctx: context.Background(), Header: http.Header{}, Channel: "http"}
		acp.Endpoint(h).Serve(rep, in, h.Caller(), &jsonrpc.Request{JSONRPC: "2.0", ID: json.RawMessage(`1`), Method: method, Params: raw})
		checkCall(t, h, rep, method, raw)
	})
}

// checkCall checks what FuzzCalls promises of one call.
func checkCall(t *testing.T, h *conformance.RPCHost, rep *reply, method string, params []byte) {
	t.Helper()
	answersItself := !acp.Streaming(method) && isACPMethod(method)
	internal := rep.err != nil && rep.err.Code == jsonrpc.CodeInternalError
	switch {
	case rep.answers > 1:
		t.Fatalf("%s %s: answered %d times", method, params, rep.answers)
	case answersItself && rep.answers != 1:
		t.Fatalf("%s %s: no answer", method, params)
	case internal && len(h.Published()) == 0: // (the kit's host has no agent to answer what it publishes)
		t.Fatalf("%s %s: internal error %+v", method, params, rep.err)
	}
	if _, err := json.Marshal(rep.result); err != nil {
		t.Fatalf("%s %s: result does not encode: %v", method, params, err)
	}
	if n := len(h.Published()); n > 1 {
		t.Fatalf("%s %s: %d requests published", method, params, n)
	}
	if n := h.Slots(); n != 0 {
		t.Fatalf("%s %s: %d stream slots held after the call", method, params, n)
	}
	for _, line := range strings.Split(strings.TrimSpace(rep.stream.Body.String()), "\n") {
		if line == "" {
			continue
		}
		var m struct {
			JSONRPC string `json:"jsonrpc"`
		}
		if json.Unmarshal([]byte(line), &m) != nil || m.JSONRPC != "2.0" {
			t.Fatalf("%s %s: stream line is not a JSON-RPC message: %s", method, params, line)
		}
	}
}
