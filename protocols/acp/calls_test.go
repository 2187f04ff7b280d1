package acp_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/acp"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// fakeHost is the pipeline as the calls see it, in memory: sessions in a
// map, publishes and cancels recorded, no frames.
type fakeHost struct {
	sessions  map[string]*host.Session
	data      map[string][]byte
	published []*e2a.Envelope
	canceled  []string
}

var (
	_ host.RPCHost   = (*fakeHost)(nil)
	_ host.RPCCaller = fakeCaller{}
)

func newFakeHost() *fakeHost {
	return &fakeHost{sessions: map[string]*host.Session{}, data: map[string][]byte{}}
}

func (h *fakeHost) Admit(http.ResponseWriter, *http.Request, string, host.Refuse) (host.Caller, bool) {
	return nil, false
}
func (h *fakeHost) Serve(http.ResponseWriter, *http.Request, string, string, render.NewRenderer) {}
func (h *fakeHost) ServeFrom(context.Context, http.ResponseWriter, string, string, int64, render.NewRenderer) {
}
func (h *fakeHost) ServeE2A(http.ResponseWriter, *http.Request, string) {}
func (h *fakeHost) Normalizer() *normalizer.Normalizer {
	return normalizer.New(normalizer.Config{Routes: normalizer.Routes{Default: "echo"}})
}
func (h *fakeHost) MaxBody() int64  { return 1 << 20 }
func (h *fakeHost) Version() string { return "test" }
func (h *fakeHost) Replay(context.Context, string, func(render.Frame) error) error {
	return egress.ErrNotFound
}
func (h *fakeHost) Stored(context.Context, string, func(*e2a.Response) error) error {
	return egress.ErrNotFound
}
func (h *fakeHost) Envelope(context.Context, string) (*e2a.Envelope, error) { return nil, nil }
func (h *fakeHost) Cancel(_ context.Context, id string) error {
	h.canceled = append(h.canceled, id)
	return nil
}
func (h *fakeHost) CancelTurns(_ context.Context, ids []string) error {
	h.canceled = append(h.canceled, ids[len(ids)-1]) // the fake's requests have all ended but the last
	return nil
}
func (h *fakeHost) AuthMethods() []host.AuthMethod {
	return []host.AuthMethod{{ID: "apiKey", Name: "API key", Description: "send the key"}}
}
func (h *fakeHost) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fakeCaller is the one principal of the fake host.
type fakeCaller struct{ h *fakeHost }

func (c fakeCaller) Input(in host.Call, req *jsonrpc.Request) normalizer.Input {
	return normalizer.Input{Header: in.Header, Channel: in.Channel, Agent: in.Agent,
		RPC: &normalizer.RPCRequest{ID: req.ID, Method: req.Method, Params: req.Params}}
}
func (c fakeCaller) Submit(ctx context.Context, s host.Submission) (*host.Submitted, error) {
	c.h.published = append(c.h.published, s.Envelope)
	if s.Turn != nil {
		c.h.sessions[s.Turn.Task.ID].RequestIDs = append(c.h.sessions[s.Turn.Task.ID].RequestIDs, "req-1")
	}
	return host.NewSubmitted(host.Accepted{RequestID: "req-1", Pool: s.Pool}, ctx, nil), nil
}
func (c fakeCaller) StreamSlot(host.Reply) (func(), bool) { return func() {}, true }
func (c fakeCaller) CreateSession(_ context.Context, protocol, id, pool string) error {
	c.h.sessions[id] = &host.Session{ID: id, Protocol: protocol, Pool: pool}
	return nil
}
func (c fakeCaller) Session(_ context.Context, protocol, id string, _ tenant.Access) (*host.Session, error) {
	s, ok := c.h.sessions[id]
	if !ok || s.Protocol != protocol {
		return nil, host.ErrSessionNotFound
	}
	return s, nil
}
func (c fakeCaller) PutSessionData(_ context.Context, kind, id string, data []byte) error {
	c.h.data[kind+"/"+id] = data
	return nil
}
func (c fakeCaller) SessionData(_ context.Context, kind, id string) ([]byte, error) {
	d, ok := c.h.data[kind+"/"+id]
	if !ok {
		return nil, egress.ErrNotFound
	}
	return d, nil
}

// reply records the answer of one call.
type reply struct {
	result   any
	err      *jsonrpc.Error
	answered bool
	hdr      http.Header
}

func (r *reply) Result(v any)              { r.result, r.answered = v, true }
func (r *reply) Error(e *jsonrpc.Error)    { r.err, r.answered = e, true }
func (r *reply) Refuse(f host.Refusal)     { r.Error(&jsonrpc.Error{Code: f.RPCCode, Message: f.Message}) }
func (r *reply) Header() http.Header       { return r.hdr }
func (*reply) Stream() http.ResponseWriter { return nil }

// call answers one request over h and returns the reply.
func call(t *testing.T, h *fakeHost, method string, params any) *reply {
	t.Helper()
	raw, _ := json.Marshal(params)
	rep := &reply{hdr: http.Header{}}
	in := host.Call{Ctx: context.Background(), Header: http.Header{}, Channel: "http"}
	acp.Endpoint(h).Serve(rep, in, fakeCaller{h}, &jsonrpc.Request{JSONRPC: "2.0", ID: json.RawMessage(`1`), Method: method, Params: raw})
	if !rep.answered && method != "session/prompt" { // a prompt answers in its stream, which a value reply has not
		t.Fatalf("%s: no answer", method)
	}
	return rep
}

// TestCalls: the local answers, sessions kept through the host's
// Sessions, a prompt published with the session's cwd, a cancel of the
// session's last request, refused setters and unknown sessions.
func TestCalls(t *testing.T) {
	h := newFakeHost()
	init := call(t, h, "initialize", map[string]any{"protocolVersion": 1})
	b, _ := json.Marshal(init.result)
	if init.err != nil || string(b) != `{"agentCapabilities":{"loadSession":true,"promptCapabilities":{"audio":true,"embeddedContext":true,"image":true}},"agentInfo":{"name":"e2a-pipeline","title":"E2A Pipeline","version":"1"},"authMethods":[{"description":"send the key","id":"apiKey","name":"API key"}],"protocolVersion":1}` {
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
	if sn.err != nil || h.sessions[id] == nil {
		t.Fatalf("session/new: %+v", sn)
	}
	if cfg := string(h.data["acp_session/"+id]); cfg == "" || strings.Contains(cfg, "secret") {
		t.Fatalf("session config %s", cfg)
	}
	prompt := map[string]any{"sessionId": id, "prompt": []any{map[string]any{"type": "text", "text": "hi"}}}
	if r := call(t, h, "session/prompt", prompt); r.answered && r.err != nil {
		t.Fatalf("session/prompt: %+v", r.err)
	}
	if len(h.published) != 1 || h.published[0].Params["cwd"] != "/w" || h.sessions[id].LastRequest() != "req-1" {
		t.Fatalf("published %+v, session %+v", h.published, h.sessions[id])
	}
	if r := call(t, h, "session/cancel", map[string]any{"sessionId": id}); r.err != nil || len(h.canceled) != 1 || h.canceled[0] != "req-1" {
		t.Fatalf("session/cancel: %+v, canceled %v", r.err, h.canceled)
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
