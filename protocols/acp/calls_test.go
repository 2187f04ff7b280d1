package acp_test

import (
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

// newHost is the conformance kit's JSON-RPC host with one scheme to list.
func newHost() *conformance.RPCHost {
	return &conformance.RPCHost{Auth: []host.AuthMethod{{ID: "apiKey", Name: "API key", Description: "send the key"}}}
}

// reply records the answer of one call: the last result or error, how
// many were given, and what was streamed when stream is set.
type reply struct {
	result   any
	err      *jsonrpc.Error
	answered bool
	answers  int
	hdr      http.Header
	stream   *httptest.ResponseRecorder
}

func (r *reply) Result(v any)           { r.result, r.answered, r.answers = v, true, r.answers+1 }
func (r *reply) Error(e *jsonrpc.Error) { r.err, r.answered, r.answers = e, true, r.answers+1 }
func (r *reply) Refuse(f host.Refusal)  { r.Error(&jsonrpc.Error{Code: f.RPCCode, Message: f.Message}) }
func (r *reply) Header() http.Header    { return r.hdr }
func (r *reply) Stream() http.ResponseWriter {
	if r.stream == nil {
		return nil
	}
	return r.stream
}

// call answers one request over h and returns the reply.
func call(t *testing.T, h *conformance.RPCHost, method string, params any) *reply {
	t.Helper()
	raw, _ := json.Marshal(params)
	rep := &reply{hdr: http.Header{}}
	in := host.Call{Ctx: context.Background(), Header: http.Header{}, Channel: "http"}
	acp.Endpoint(h).Serve(rep, in, h.Caller(), &jsonrpc.Request{JSONRPC: "2.0", ID: json.RawMessage(`1`), Method: method, Params: raw})
	if !rep.answered && method != "session/prompt" { // a prompt answers in its stream, which a value reply has not
		t.Fatalf("%s: no answer", method)
	}
	return rep
}

// TestCalls: the local answers, sessions kept through the host's
// Sessions, a prompt published with the session's cwd, a cancel of the
// session's last request, refused setters and unknown sessions.
func TestCalls(t *testing.T) {
	h := newHost()
	// A host that knows no pool's input modes: every pool takes the
	// defaults (text/plain, application/json), so neither image nor audio.
	init := call(t, h, "initialize", map[string]any{"protocolVersion": 1})
	b, _ := json.Marshal(init.result)
	if init.err != nil || string(b) != `{"agentCapabilities":{"loadSession":true,"mcpCapabilities":{"http":true,"sse":true},"promptCapabilities":{"audio":false,"embeddedContext":true,"image":false}},"agentInfo":{"name":"e2a-pipeline","title":"E2A Pipeline","version":"1"},"authMethods":[{"description":"send the key","id":"apiKey","name":"API key"}],"protocolVersion":1}` {
		t.Fatalf("initialize: %s %v", b, init.err)
	}
	if r := call(t, h, "authenticate", map[string]any{"methodId": "bearer"}); r.err == nil || r.err.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("authenticate with an unknown method: %+v", r)
	}
	if r := call(t, h, "authenticate", map[string]any{"methodId": "apiKey"}); r.err != nil {
		t.Fatalf("authenticate: %+v", r.err)
	}
	sn := call(t, h, "session/new", map[string]any{"cwd": "/w", "mcpServers": []any{
		map[string]any{"name": "m", "command": "x", "args": []any{}, "env": []any{map[string]any{"name": "TOKEN", "value": "secret"}}}}})
	id, _ := sn.result.(map[string]any)["sessionId"].(string)
	if sn.err != nil || h.Session(id) == nil {
		t.Fatalf("session/new: %+v", sn)
	}
	if cfg := string(h.SessionData("acp_session", id)); cfg == "" || strings.Contains(cfg, "secret") {
		t.Fatalf("session config %s", cfg)
	}
	prompt := map[string]any{"sessionId": id, "prompt": []any{map[string]any{"type": "text", "text": "hi"}}}
	if r := call(t, h, "session/prompt", prompt); r.answered && r.err != nil {
		t.Fatalf("session/prompt: %+v", r.err)
	}
	pub := h.Published()
	if len(pub) != 1 || pub[0].Params["cwd"] != "/w" || h.Session(id).LastRequest() != pub[0].RequestID || h.Slots() != 0 {
		t.Fatalf("published %+v, session %+v, slots held %d", pub, h.Session(id), h.Slots())
	}
	if r := call(t, h, "session/cancel", map[string]any{"sessionId": id}); r.err != nil || len(h.Canceled()) != 1 || h.Canceled()[0] != pub[0].RequestID {
		t.Fatalf("session/cancel: %+v, canceled %v", r.err, h.Canceled())
	}
	if r := call(t, h, "session/set_mode", map[string]any{"sessionId": id, "modeId": "x"}); r.err == nil || r.err.Code != jsonrpc.CodeMethodNotFound {
		t.Fatalf("session/set_mode: %+v", r)
	}
	if r := call(t, h, "session/prompt", map[string]any{"sessionId": "nope", "prompt": []any{}}); r.err == nil || r.err.Code != jsonrpc.CodeACPResourceNotFound {
		t.Fatalf("unknown session: %+v", r)
	}
}

// TestEndpoint: the dispatch table, the stdio classification and the
// refusal shape.
func TestEndpoint(t *testing.T) {
	e := acp.Endpoint(nil)
	if !e.Streaming("session/prompt") || e.Streaming("session/new") || e.Metric("_vendor/x") != "_ext" || e.Metric("x/y") != "other" {
		t.Error("table")
	}
	lc := e.Lines.Classify("session/prompt", json.RawMessage(`{"sessionId":"s"}`))
	if !lc.Publishes || !lc.Turn || lc.Session != "s" {
		t.Errorf("session/prompt: %+v", lc)
	}
	if lc := e.Lines.Classify("session/cancel", json.RawMessage(`{"sessionId":"s"}`)); lc.Publishes || !lc.CancelsTurns || lc.Session != "s" {
		t.Errorf("session/cancel: %+v", lc)
	}
	if lc := e.Lines.Classify("session/new", nil); lc.Publishes || lc.Turn {
		t.Errorf("session/new: %+v", lc)
	}
	w := httptest.NewRecorder()
	e.Refuse(w, host.Refusal{Status: 401, RPCCode: jsonrpc.CodeAuthentication, Message: "no"})
	var resp jsonrpc.Response
	if w.Code != 401 || json.Unmarshal(w.Body.Bytes(), &resp) != nil || resp.Error == nil || resp.Error.Code != jsonrpc.CodeACPAuthRequired {
		t.Errorf("refusal %d %s", w.Code, w.Body)
	}
}

// TestSessionNewMCPServerTypes: an MCP server entry of session/new may name
// its stdio transport ("type":"stdio"): the ACP schema's stdio branch
// (McpServerStdio) does not forbid the member, and acp-go-sdk reads such
// an entry as its Stdio variant. It needs what an untyped one needs; a
// type ACP does not define stays refused.
func TestSessionNewMCPServerTypes(t *testing.T) {
	h := newHost()
	stdio := map[string]any{"type": "stdio", "name": "m", "command": "x", "args": []any{}, "env": []any{}}
	if r := call(t, h, "session/new", map[string]any{"cwd": "/w", "mcpServers": []any{stdio}}); r.err != nil {
		t.Fatalf(`an MCP server with "type":"stdio": %+v`, r.err)
	}
	for _, bad := range []map[string]any{
		{"type": "stdio", "name": "m", "args": []any{}, "env": []any{}},
		{"type": "ws", "name": "m", "command": "x", "args": []any{}, "env": []any{}},
	} {
		if r := call(t, h, "session/new", map[string]any{"cwd": "/w", "mcpServers": []any{bad}}); r.err == nil || r.err.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("%v: want -32602, got %+v", bad, r)
		}
	}
}
