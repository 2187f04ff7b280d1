package tracing_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/httpagent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/internal/tracing"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/workflow"
)

const (
	revTraceID    = "0af7651916cd43dd8448eb211c80319c"
	revClientSpan = "b7ad6b7169203331"
	revParent     = "00-" + revTraceID + "-" + revClientSpan + "-01"
)

// revSeen is what a handler saw of one request.
type revSeen struct {
	id    string
	trace e2a.TraceContext
	span  trace.SpanContext
}

// revRig is the front (ingress and egress behind tracing.Handler, as e2a
// serve mounts them) on an embedded NATS server, with tracing exporting
// to memory, and pool "traced" recording what its handler sees.
type revRig struct {
	url  string
	nc   *nats.Conn
	exp  *tracetest.InMemoryExporter
	p    *tracing.Provider
	seen chan revSeen
}

// memTracing starts tracing (the OTEL_* variables cleared) with an
// in-memory exporter, shut down when the test ends.
func memTracing(t *testing.T) (*tracetest.InMemoryExporter, *tracing.Provider) {
	t.Helper()
	clearOTELEnv(t)
	exp := tracetest.NewInMemoryExporter()
	p, err := tracing.Start(context.Background(), tracing.WithExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return exp, p
}

func startRevRig(t *testing.T) *revRig { return startRevRigTracing(t, true) }

// startRevRigTracing is startRevRig, with tracing off when on is false.
func startRevRigTracing(t *testing.T, on bool) *revRig {
	t.Helper()
	clearOTELEnv(t)
	exp := tracetest.NewInMemoryExporter()
	p := &tracing.Provider{}
	if on {
		var err error
		if p, err = tracing.Start(context.Background(), tracing.WithExporter(exp)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	}
	_, nc := natstest.RunServer(t)
	reg := prometheus.NewRegistry()
	srv := pipetest.ServeFrontWrapped(t, nc, func(h http.Handler) http.Handler { return tracing.Handler(h, "/healthz", "/readyz", "/metrics") },
		[]egress.Option{egress.WithRegisterer(reg), egress.WithProjections(protocols.FillProjections)},
		ingress.WithRegisterer(reg), ingress.WithDefaultPool("traced"))
	r := &revRig{url: srv.URL, nc: nc, exp: exp, p: p, seen: make(chan revSeen, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = agent.Run(ctx, nc, "traced", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
			tc, _ := agent.TraceFrom(ctx)
			r.seen <- revSeen{id: env.RequestID, trace: tc, span: trace.SpanContextFromContext(ctx)}
			if err := w.Chunk(e2a.DeltaText, "a"); err != nil {
				return err
			}
			return w.Complete(map[string]any{"content": "a"})
		}), agent.WithMetrics(reg))
	}()
	t.Cleanup(func() { cancel(); <-done })
	js := natstest.JetStream(t, nc)
	name, _ := streams.AgentConsumerName("traced")
	testkit.Eventually(t, 30*time.Second, "the traced pool's consumer", func() bool {
		_, err := js.Consumer(context.Background(), streams.RequestsStream, name)
		return err == nil
	})
	return r
}

// post posts body to path with the client's traceparent and returns the
// whole answer.
func (r *revRig) post(t *testing.T, path, accept, body string) (int, string) {
	t.Helper()
	return r.postTraced(t, path, accept, body, revParent)
}

// postTraced is post with traceparent as the header ("": none).
func (r *revRig) postTraced(t *testing.T, path, accept, body, traceparent string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (r *revRig) handled(t *testing.T) revSeen {
	t.Helper()
	select {
	case s := <-r.seen:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("the handler never ran")
		return revSeen{}
	}
}

// spans flushes and returns the ended spans.
func (r *revRig) spans(t *testing.T) tracetest.SpanStubs {
	t.Helper()
	if err := r.p.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r.exp.GetSpans()
}

func spanByID(ss tracetest.SpanStubs, id trace.SpanID) *tracetest.SpanStub {
	for i := range ss {
		if ss[i].SpanContext.SpanID() == id {
			return &ss[i]
		}
	}
	return nil
}

// checkChain checks that the handler's span is "process traced" in the
// client's trace, child of a "publish e2a.req" span, itself child of the
// door's HTTP server span, child of the client's span.
func (r *revRig) checkChain(t *testing.T, s revSeen) {
	t.Helper()
	checkChain(t, r.p, r.exp, s, "HTTP POST ")
}

// checkChain is revRig.checkChain on p's exporter exp, the door's server
// span named server and what follows.
func checkChain(t *testing.T, p *tracing.Provider, exp *tracetest.InMemoryExporter, s revSeen, server string) {
	t.Helper()
	if !strings.Contains(s.trace.Traceparent, revTraceID) {
		t.Fatalf("agent.TraceFrom = %q, want the client's trace %s", s.trace.Traceparent, revTraceID)
	}
	if s.span.TraceID().String() != revTraceID {
		t.Fatalf("handler ctx span trace %s, want %s", s.span.TraceID(), revTraceID)
	}
	// The handler's span ends after it returns: wait for it.
	var ss tracetest.SpanStubs
	testkit.Eventually(t, 10*time.Second, "the handling span exported", func() bool {
		if err := p.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
		ss = exp.GetSpans()
		return spanByID(ss, s.span.SpanID()) != nil
	})
	handle := spanByID(ss, s.span.SpanID())
	if handle.Name != "process traced" {
		t.Fatalf("handler span %q", handle.Name)
	}
	pub := spanByID(ss, handle.Parent.SpanID())
	if pub == nil || pub.Name != "publish e2a.req" {
		t.Fatalf("parent of %q is %v, want publish e2a.req", handle.Name, pub)
	}
	srv := spanByID(ss, pub.Parent.SpanID())
	if srv == nil || srv.SpanKind != trace.SpanKindServer || !strings.HasPrefix(srv.Name, server) {
		var name string
		if srv != nil {
			name = srv.Name
		}
		t.Fatalf("parent of publish e2a.req is %q (%s), want the door's server span %s…", name, pub.Parent.SpanID(), server)
	}
	if srv.Parent.SpanID().String() != revClientSpan || srv.Parent.TraceID().String() != revTraceID {
		t.Fatalf("server span %q parent %s/%s, want the client's %s/%s", srv.Name, srv.Parent.TraceID(), srv.Parent.SpanID(), revTraceID, revClientSpan)
	}
}

// A2A v0.3 JSON-RPC message/send with a traceparent header: the handler's
// context and its span are in the client's trace, chained HTTP server →
// publish → process.
func TestTraceA2AMessageSend(t *testing.T) {
	r := startRevRig(t)
	code, body := r.post(t, "/a2a?agent=traced", "", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{`+
		`"kind":"message","role":"user","messageId":"m-1","parts":[{"kind":"text","text":"hi"}]}}}`)
	if code != http.StatusOK || !strings.Contains(body, `"result"`) {
		t.Fatalf("message/send: %d %s", code, body)
	}
	r.checkChain(t, r.handled(t))
}

// A2A v1.0 JSON-RPC SendMessage at /a2a/v1, same checks.
func TestTraceA2AV1SendMessage(t *testing.T) {
	r := startRevRig(t)
	code, body := r.post(t, "/pools/traced/a2a/v1", "", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER",`+
		`"messageId":"m-2","parts":[{"text":"hi"}]}}}`)
	if code != http.StatusOK || !strings.Contains(body, `"result"`) {
		t.Fatalf("SendMessage: %d %s", code, body)
	}
	r.checkChain(t, r.handled(t))
}

// acpSession starts an ACP session of the traced pool over HTTP and
// returns its id.
func (r *revRig) acpSession(t *testing.T) string {
	t.Helper()
	code, body := r.post(t, "/pools/traced/acp", "", `{"jsonrpc":"2.0","id":"new","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	var res struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &res) != nil || res.Result.SessionID == "" {
		t.Fatalf("session/new: %d %s", code, body)
	}
	return res.Result.SessionID
}

// ACP session/prompt over HTTP with a traceparent header, same checks.
func TestTraceACPPrompt(t *testing.T) {
	r := startRevRig(t)
	code, body := r.post(t, "/pools/traced/acp", "", `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"`+
		r.acpSession(t)+`","prompt":[{"type":"text","text":"hi"}]}}`)
	if code != http.StatusOK || !strings.Contains(body, "end_turn") {
		t.Fatalf("session/prompt: %d %s", code, body)
	}
	r.checkChain(t, r.handled(t))
}

// E2A with SSE answer mode (Accept: text/event-stream on POST), same
// checks: the publish runs while the answer streams.
func TestTraceE2ASSE(t *testing.T) {
	r := startRevRig(t)
	code, body := r.post(t, "/v1/requests?agent=traced", "text/event-stream", `{"request_id":"rev-sse","params":{"text":"x"}}`)
	if code != http.StatusOK || !strings.Contains(body, "e2a.complete") {
		t.Fatalf("POST SSE: %d %s", code, body)
	}
	r.checkChain(t, r.handled(t))
}

// A request an integrator publishes straight onto e2a.req.<pool>.<id>,
// its trace context in the NATS headers only (the envelope has none): the
// handler's span is a child of that context and agent.TraceFrom is in its
// trace.
func TestTraceDirectPublishHeaders(t *testing.T) {
	r := startRevRig(t)
	subj, _ := subjects.Request("traced", "rev-direct")
	env := `{"protocol_version":"` + e2a.ProtocolVersion + `","request_id":"rev-direct","method":"e2a.request","channel":"nats",` +
		`"timestamp":"2026-01-01T00:00:00Z","params":{"text":"x"}}`
	m := &nats.Msg{Subject: subj, Data: []byte(env), Header: nats.Header{}}
	m.Header.Set(subjects.HeaderMsgID, "rev-direct")
	m.Header.Set("traceparent", revParent)
	if _, err := streams.Publish(context.Background(), r.nc, m); err != nil {
		t.Fatal(err)
	}
	s := r.handled(t)
	if s.id != "rev-direct" {
		t.Fatalf("handled %q", s.id)
	}
	if !strings.Contains(s.trace.Traceparent, revTraceID) || s.span.TraceID().String() != revTraceID {
		t.Fatalf("handler trace %q / span %s, want trace %s", s.trace.Traceparent, s.span.TraceID(), revTraceID)
	}
	var ss tracetest.SpanStubs
	testkit.Eventually(t, 10*time.Second, "the handling span exported", func() bool {
		ss = r.spans(t)
		return spanByID(ss, s.span.SpanID()) != nil
	})
	if h := spanByID(ss, s.span.SpanID()); h.Parent.SpanID().String() != revClientSpan {
		t.Fatalf("process span parent %s, want the header's %s", h.Parent.SpanID(), revClientSpan)
	}
}

// A bridge (httpagent) with tracing on: the upstream's request carries a
// traceparent in the client's trace whose parent is a span of the
// request's handling (the process span or one under it), not the client's
// own span id or another trace.
func TestTraceBridgeUpstream(t *testing.T) {
	exp, p := memTracing(t)
	var mu sync.Mutex
	var got []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		got = append(got, r.Header.Get("traceparent"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"response_kind":"e2a.complete","body":{"result":1}}`)
	}))
	t.Cleanup(up.Close)
	_, nc := natstest.RunServer(t)
	reg := prometheus.NewRegistry()
	srv := pipetest.ServeFrontWrapped(t, nc, func(h http.Handler) http.Handler { return tracing.Handler(h) },
		[]egress.Option{egress.WithRegisterer(reg)}, ingress.WithRegisterer(reg))
	c, err := bridge.NewClient(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	hu, err := httpagent.New(c)
	if err != nil {
		t.Fatal(err)
	}
	h, err := bridge.New("br", hu, bridge.WithMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = agent.Run(ctx, nc, "br", h) }()
	t.Cleanup(func() { cancel(); <-done })
	name, _ := streams.AgentConsumerName("br")
	js := natstest.JetStream(t, nc)
	testkit.Eventually(t, 30*time.Second, "the br pool's consumer", func() bool {
		_, err := js.Consumer(context.Background(), streams.RequestsStream, name)
		return err == nil
	})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/requests?agent=br", strings.NewReader(`{"request_id":"rev-br","params":{"text":"x"}}`))
	req.Header.Set("traceparent", revParent)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
	}
	resp.Body.Close()
	mu.Lock()
	tps := append([]string(nil), got...)
	mu.Unlock()
	if len(tps) != 1 {
		t.Fatalf("upstream called %d times: %q", len(tps), tps)
	}
	parts := strings.Split(tps[0], "-")
	if len(parts) != 4 || parts[1] != revTraceID || parts[2] == revClientSpan {
		t.Fatalf("upstream traceparent %q, want trace %s under the handling span", tps[0], revTraceID)
	}
	var ss tracetest.SpanStubs
	testkit.Eventually(t, 10*time.Second, "the process span exported", func() bool {
		ss = exp.GetSpans()
		_ = p.ForceFlush(context.Background())
		for _, s := range ss {
			if s.Name == "process br" {
				return true
			}
		}
		return false
	})
	var parent *tracetest.SpanStub
	for i := range ss {
		if ss[i].SpanContext.SpanID().String() == parts[2] {
			parent = &ss[i]
		}
	}
	if parent == nil {
		t.Fatalf("the upstream's parent span %s was not exported (spans %v)", parts[2], spanNames(ss))
	}
	if parent.Name != "POST" || parent.SpanKind != trace.SpanKindClient || !hasIntAttr(parent.Attributes, "http.response.status_code", 200) {
		t.Errorf("the upstream's parent span is %q (kind %v, %v); want the bridge's client span POST with status 200", parent.Name, parent.SpanKind, parent.Attributes)
	}
	for s := parent; s.Name != "process br"; {
		s = spanByID(ss, s.Parent.SpanID())
		if s == nil {
			t.Fatalf("the upstream's parent span %q is not under process br", parent.Name)
		}
	}
}

// hasIntAttr reports whether attrs hold key with the integer value v.
func hasIntAttr(attrs []attribute.KeyValue, key string, v int64) bool {
	for _, a := range attrs {
		if string(a.Key) == key && a.Value.Type() == attribute.INT64 && a.Value.AsInt64() == v {
			return true
		}
	}
	return false
}

func spanNames(ss tracetest.SpanStubs) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

var _ sdktrace.SpanExporter = (*tracetest.InMemoryExporter)(nil)

// TestTraceEgressSpanOfPostSSE: a POST answered over SSE (the same call
// publishes and streams) has its `egress e2a_sse` span under the call's
// own HTTP span, in the client's trace, as docs/operations.md says (it
// said under the request's publish span, which the code does only for a
// reading call outside the request's trace).
func TestTraceEgressSpanOfPostSSE(t *testing.T) {
	r := startRevRig(t)
	code, body := r.post(t, "/v1/requests?agent=traced", "text/event-stream", `{"request_id":"rev-eg","params":{"text":"x"}}`)
	if code != http.StatusOK || !strings.Contains(body, "e2a.complete") {
		t.Fatalf("POST SSE: %d %s", code, body)
	}
	r.handled(t)
	var ss tracetest.SpanStubs
	var eg *tracetest.SpanStub
	testkit.Eventually(t, 10*time.Second, "the egress span exported", func() bool {
		ss = r.spans(t)
		for i := range ss {
			if ss[i].Name == "egress e2a_sse" {
				eg = &ss[i]
				return true
			}
		}
		return false
	})
	parent := spanByID(ss, eg.Parent.SpanID())
	if parent == nil || parent.Name != "HTTP POST /v1/requests" {
		name := "(not exported)"
		if parent != nil {
			name = parent.Name
		}
		t.Fatalf("egress e2a_sse's parent is %q, want the call's HTTP POST /v1/requests (links %d)", name, len(eg.Links))
	}
}

// Tracing off: the client's traceparent reaches agent.TraceFrom unchanged
// from every HTTP door (A2A v0.3, A2A v1.0, ACP, E2A SSE) and from a
// request published straight onto the subject with the header only.
func TestTraceOffEveryDoor(t *testing.T) {
	r := startRevRigTracing(t, false)
	if tracing.Enabled() {
		t.Fatal("tracing on")
	}
	check := func(door string) {
		t.Helper()
		if s := r.handled(t); s.trace.Traceparent != revParent {
			t.Errorf("%s: agent.TraceFrom = %q, want the client's %q", door, s.trace.Traceparent, revParent)
		}
	}
	if code, body := r.post(t, "/a2a?agent=traced", "", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{`+
		`"kind":"message","role":"user","messageId":"m-off1","parts":[{"kind":"text","text":"hi"}]}}}`); code != http.StatusOK {
		t.Fatalf("a2a: %d %s", code, body)
	}
	check("A2A v0.3")
	if code, body := r.post(t, "/pools/traced/a2a/v1", "", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER",`+
		`"messageId":"m-off2","parts":[{"text":"hi"}]}}}`); code != http.StatusOK {
		t.Fatalf("a2a v1: %d %s", code, body)
	}
	check("A2A v1.0")
	code, body := r.post(t, "/pools/traced/acp", "", `{"jsonrpc":"2.0","id":"new","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	var res struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &res) != nil {
		t.Fatalf("session/new: %d %s", code, body)
	}
	if code, body := r.post(t, "/pools/traced/acp", "", `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"`+
		res.Result.SessionID+`","prompt":[{"type":"text","text":"hi"}]}}`); code != http.StatusOK {
		t.Fatalf("acp: %d %s", code, body)
	}
	check("ACP")
	if code, body := r.post(t, "/v1/requests?agent=traced", "text/event-stream", `{"request_id":"rev-off-sse","params":{"text":"x"}}`); code != http.StatusOK {
		t.Fatalf("e2a: %d %s", code, body)
	}
	check("E2A")
	subj, _ := subjects.Request("traced", "rev-off-direct")
	m := &nats.Msg{Subject: subj, Header: nats.Header{}, Data: []byte(`{"protocol_version":"` + e2a.ProtocolVersion +
		`","request_id":"rev-off-direct","method":"e2a.request","channel":"nats","timestamp":"2026-01-01T00:00:00Z","params":{"text":"x"}}`)}
	m.Header.Set("traceparent", revParent)
	if _, err := streams.Publish(context.Background(), r.nc, m); err != nil {
		t.Fatal(err)
	}
	check("direct publish")
	// The frames of the direct request carry it too.
	respSubj, _ := subjects.Response("rev-off-direct")
	testkit.Eventually(t, 10*time.Second, "the direct request's frames", func() bool {
		stored, err := streams.DirectGetAll(context.Background(), r.nc, streams.ResponsesStream, respSubj, 0, 16)
		if err != nil || len(stored) < 2 {
			return false
		}
		for _, f := range stored {
			if f.Header.Get("traceparent") != revParent {
				t.Fatalf("frame traceparent %q, want %q", f.Header.Get("traceparent"), revParent)
			}
		}
		return true
	})
}

// A bridge's upstream call that fails (the upstream refuses the
// connection) is an error on its client span, without the secrets of the
// upstream's URL: a key in its query, a token as a path segment (the
// transport's error quotes the URL it was called at).
func TestTraceBridgeCallErrorWithoutURLSecrets(t *testing.T) {
	exp, p := memTracing(t)
	const key, pathTok = "qkey-5ecret-value", "hook7Tok3nSegment42"
	c, err := bridge.NewClient("http://" + testkit.ClosedAddr(t) + "/hooks/" + pathTok + "?key=" + key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.Base().String(), strings.NewReader("{}"))
	if _, err := c.Do(req, nil); err == nil {
		t.Fatal("a call to a closed port succeeded")
	}
	if err := p.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var call *tracetest.SpanStub
	ss := exp.GetSpans()
	for i := range ss {
		if ss[i].Name == "POST" {
			call = &ss[i]
		}
	}
	if call == nil {
		t.Fatalf("no client span POST (spans %v)", spanNames(ss))
	}
	if call.Status.Code != codes.Error || len(call.Events) == 0 {
		t.Fatalf("the failed call's span: status %v, events %v; want an error with the error's event", call.Status, call.Events)
	}
	var all []attribute.KeyValue
	all = append(all, call.Attributes...)
	for _, ev := range call.Events {
		all = append(all, ev.Attributes...)
	}
	said := false
	for _, a := range all {
		v := a.Value.Emit()
		if strings.Contains(v, key) || strings.Contains(v, pathTok) {
			t.Errorf("span attribute %s = %q holds a secret of the upstream's URL", a.Key, v)
		}
		said = said || a.Key == "exception.message" && strings.Contains(v, "connection refused") && strings.Contains(v, c.Name())
	}
	if !said {
		t.Errorf("no exception.message naming the upstream and the failure: %v", all)
	}
	if call.Status.Description != "" && (strings.Contains(call.Status.Description, key) || strings.Contains(call.Status.Description, pathTok)) {
		t.Errorf("span status %q holds a secret of the upstream's URL", call.Status.Description)
	}
}

// A workflow's ApiCall is a client span under the workflow pool's process
// span, in the client's trace, and the API called gets its traceparent
// (with the client's tracestate), as a bridge's upstream does: the calls
// went out without trace context, so a workflow's trace ended at its
// process span.
func TestTraceWorkflowApiCall(t *testing.T) {
	exp, p := memTracing(t)
	got := make(chan http.Header, 4)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"users":[1,2]}`)
	}))
	t.Cleanup(api.Close)
	pol := &workflow.Policy{}
	if err := pol.AllowHosts("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	exec := workflow.New(workflow.Options{Policy: pol})
	_, nc := natstest.RunServer(t)
	reg := prometheus.NewRegistry()
	srv := pipetest.ServeFrontWrapped(t, nc, func(h http.Handler) http.Handler { return tracing.Handler(h) },
		[]egress.Option{egress.WithRegisterer(reg)}, ingress.WithRegisterer(reg), ingress.WithWorkflow(exec))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = agent.Run(ctx, nc, workflow.Pool, exec, agent.WithMetrics(reg)) }()
	t.Cleanup(func() { cancel(); <-done })
	name, _ := streams.AgentConsumerName(workflow.Pool)
	js := natstest.JetStream(t, nc)
	testkit.Eventually(t, 30*time.Second, "the workflow pool's consumer", func() bool {
		_, err := js.Consumer(context.Background(), streams.RequestsStream, name)
		return err == nil
	})
	wf := `{"type":"operationUpdate","operationId":"fetch","operation":{"ApiCall":{"method":"GET","url":"` + api.URL + `/users","outputPath":"/workflow/users"}}}` + "\n" +
		`{"type":"beginExecution","executionId":"wf-trace","operationOrder":["fetch"]}`
	body, _ := json.Marshal(map[string]string{"workflow": wf})
	resp, b := testkit.Do(t, http.MethodPost, srv.URL+"/api/v1/workflows/execute", string(body),
		"Content-Type", "application/json", "traceparent", revParent, "tracestate", "congo=t61rcWkgMzE")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("execute: %d %s", resp.StatusCode, b)
	}
	h := testkit.Receive(t, got, 10*time.Second, "the API was not called")
	parts := strings.Split(h.Get("traceparent"), "-")
	if len(parts) != 4 || parts[1] != revTraceID || parts[2] == revClientSpan || h.Get("tracestate") != "congo=t61rcWkgMzE" {
		t.Fatalf("the API got traceparent %q, tracestate %q; want the client's trace %s under the call's span, its tracestate",
			h.Get("traceparent"), h.Get("tracestate"), revTraceID)
	}
	var ss tracetest.SpanStubs
	testkit.Eventually(t, 10*time.Second, "the process span exported", func() bool {
		_ = p.ForceFlush(context.Background())
		ss = exp.GetSpans()
		for _, s := range ss {
			if s.Name == "process "+workflow.Pool {
				return true
			}
		}
		return false
	})
	id, _ := trace.SpanIDFromHex(parts[2])
	call := spanByID(ss, id)
	if call == nil || call.Name != "GET" || call.SpanKind != trace.SpanKindClient || !hasIntAttr(call.Attributes, "http.response.status_code", 200) {
		t.Fatalf("the API's parent span is %v; want the ApiCall's client span GET with status 200 (spans %v)", call, spanNames(ss))
	}
	if parent := spanByID(ss, call.Parent.SpanID()); parent == nil || parent.Name != "process "+workflow.Pool {
		t.Fatalf("the ApiCall's span is not under process %s: parent %v", workflow.Pool, parent)
	}
}

// A2A v1.0 over gRPC, the traceparent and tracestate in the call's
// metadata: the call is a server span (a2a.v1 method, rpc.* attributes)
// child of the client's span, and the chain goes on as on the HTTP doors
// (publish, process). The call had no span: its publish was the client's
// span's child, the call's time and status in no span.
func TestTraceA2AV1GRPC(t *testing.T) {
	exp, p := memTracing(t)
	pl := pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithIngress(ingress.WithDefaultPool("traced")))
	seen := make(chan revSeen, 1)
	pl.Pool("traced", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		tc, _ := agent.TraceFrom(ctx)
		seen <- revSeen{id: env.RequestID, trace: tc, span: trace.SpanContextFromContext(ctx)}
		return w.Complete(map[string]any{"content": "a"})
	}))
	cc, err := grpc.NewClient(pl.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", revParent, "tracestate", "congo=t61rcWkgMzE")
	if _, err := a2apb.NewA2AServiceClient(cc).SendMessage(ctx, &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "m-grpc",
		Role: a2apb.Role_ROLE_USER, Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hi"}}}}}); err != nil {
		t.Fatal(err)
	}
	s := testkit.Receive(t, seen, 30*time.Second, "the handler never ran")
	if s.trace.Tracestate != "congo=t61rcWkgMzE" {
		t.Errorf("agent.TraceFrom tracestate %q, want the call's", s.trace.Tracestate)
	}
	checkChain(t, p, exp, s, "lf.a2a.v1.A2AService/SendMessage")
	for _, sp := range exp.GetSpans() {
		if sp.SpanKind == trace.SpanKindServer && !hasIntAttr(sp.Attributes, "rpc.grpc.status_code", 0) {
			t.Errorf("server span %q: attributes %v, want rpc.grpc.status_code 0", sp.Name, sp.Attributes)
		}
	}
}
