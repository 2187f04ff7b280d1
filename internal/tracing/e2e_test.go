package tracing_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/tracing"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// collector is an OTLP/HTTP trace receiver: it keeps the spans of every
// export it is sent.
type collector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	errs  []string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
		c.errs = append(c.errs, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type")+" "+errString(err))
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (c *collector) received() ([]*tracepb.Span, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.Span(nil), c.spans...), append([]string(nil), c.errs...)
}

// clearOTELEnv leaves the OTEL_* variables Start reads unset for the test.
func clearOTELEnv(t *testing.T) {
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"} {
		t.Setenv(k, "")
	}
}

// One request through ingress (real HTTP), JetStream (embedded NATS), an
// agent and an egress stream: the spans exported over OTLP/HTTP form one
// trace, the client's, chained HTTP server → publish → agent handling →
// frame publishes, with the egress stream under the request's publish.
func TestSpansOfOneRequestEndToEnd(t *testing.T) {
	clearOTELEnv(t)
	col := &collector{}
	otlp := httptest.NewServer(col)
	t.Cleanup(otlp.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.URL)
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")
	t.Setenv("OTEL_SERVICE_NAME", "e2a-test")

	ctx := context.Background()
	p, err := tracing.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	if !p.Enabled() || !tracing.Enabled() {
		t.Fatal("tracing off with OTEL_EXPORTER_OTLP_ENDPOINT set")
	}

	_, nc := natstest.RunServer(t)
	reg := prometheus.NewRegistry()
	eg, err := egress.New(nc, egress.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	in, err := ingress.New(nc, eg, ingress.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	in.Register(mux)
	eg.Register(mux)
	srv := httptest.NewServer(tracing.Handler(mux, "/healthz"))
	t.Cleanup(srv.Close)

	handlerTrace := make(chan e2a.TraceContext, 1)
	actx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		_ = agent.Run(actx, nc, "traced", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
			tc, _ := agent.TraceFrom(ctx)
			handlerTrace <- tc
			if err := w.Chunk(e2a.DeltaText, "a"); err != nil {
				return err
			}
			return w.Complete(map[string]any{"content": "a"})
		}))
	}()
	t.Cleanup(func() { stopAgent(); <-agentDone })

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	const clientSpan = "00f067aa0ba902b7"
	req, _ := http.NewRequest("POST", srv.URL+"/v1/requests?agent=traced", strings.NewReader(`{"request_id":"otel-1","params":{"text":"x"}}`))
	req.Header.Set("traceparent", "00-"+traceID+"-"+clientSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
	// The stream, read to its final frame, with no traceparent of its own.
	sreq, _ := http.NewRequest("GET", srv.URL+"/v1/requests/otel-1/stream", nil)
	sreq.Header.Set("Accept", "text/event-stream")
	sresp, err := http.DefaultClient.Do(sreq)
	if err != nil {
		t.Fatal(err)
	}
	events := 0
	sc := bufio.NewScanner(sresp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data:") {
			events++
		}
	}
	sresp.Body.Close()
	if sresp.StatusCode != http.StatusOK || events < 2 {
		t.Fatalf("stream: %d, %d events", sresp.StatusCode, events)
	}
	tc := <-handlerTrace
	// Every span has ended: the HTTP handlers' when Close returns (it waits
	// for outstanding requests), the agent's handling before Run returns.
	srv.Close()
	stopAgent()
	<-agentDone
	if err := p.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	spans, errs := col.received()
	if len(errs) > 0 {
		t.Fatalf("bad exports: %q", errs)
	}

	byName := map[string][]*tracepb.Span{}
	for _, s := range spans {
		if hex.EncodeToString(s.TraceId) == traceID {
			byName[s.Name] = append(byName[s.Name], s)
		}
	}
	one := func(name string, kind tracepb.Span_SpanKind) *tracepb.Span {
		t.Helper()
		if len(byName[name]) != 1 {
			t.Fatalf("%d spans %q in the client's trace; have %v", len(byName[name]), name, names(spans))
		}
		s := byName[name][0]
		if s.Kind != kind {
			t.Fatalf("span %q kind %v, want %v", name, s.Kind, kind)
		}
		return s
	}
	parentIs := func(child, parent *tracepb.Span) {
		t.Helper()
		if string(child.ParentSpanId) != string(parent.SpanId) {
			t.Fatalf("span %q has parent %x, want %q (%x)", child.Name, child.ParentSpanId, parent.Name, parent.SpanId)
		}
	}
	server := one("HTTP POST /v1/requests", tracepb.Span_SPAN_KIND_SERVER)
	if hex.EncodeToString(server.ParentSpanId) != clientSpan {
		t.Fatalf("server span parent %x, want the client's %s", server.ParentSpanId, clientSpan)
	}
	publish := one("publish e2a.req", tracepb.Span_SPAN_KIND_PRODUCER)
	parentIs(publish, server)
	handle := one("process traced", tracepb.Span_SPAN_KIND_CONSUMER)
	parentIs(handle, publish)
	frames := byName["publish e2a.resp"]
	if len(frames) < 2 {
		t.Fatalf("%d frame publish spans, want at least 2 (a chunk and the final frame)", len(frames))
	}
	for _, f := range frames {
		if f.Kind != tracepb.Span_SPAN_KIND_PRODUCER {
			t.Fatalf("frame span kind %v", f.Kind)
		}
		parentIs(f, handle)
	}
	stream := one("egress e2a_sse", tracepb.Span_SPAN_KIND_INTERNAL)
	parentIs(stream, publish)
	if len(stream.Links) != 1 {
		t.Fatalf("egress span links %v, want the GET's server span", stream.Links)
	}

	// Each stored frame carries its publish span's context: the hop to
	// egress and to E2A_AUDIT is joined by the headers.
	frameIDs := map[string]bool{}
	for _, f := range frames {
		frameIDs["00-"+traceID+"-"+hex.EncodeToString(f.SpanId)+"-01"] = true
	}
	respSubj, _ := subjects.Response("otel-1")
	stored, err := streams.DirectGetAll(ctx, nc, streams.ResponsesStream, respSubj, 0, 16)
	if err != nil || len(stored) != len(frames) {
		t.Fatalf("%d stored frames for %d frame spans: %v", len(stored), len(frames), err)
	}
	for _, m := range stored {
		if tp := m.Header.Get("traceparent"); !frameIDs[tp] {
			t.Fatalf("stored frame traceparent %q is not a frame span's", tp)
		}
	}
	// The handler's trace context is its handling span's.
	if want := "00-" + traceID + "-" + hex.EncodeToString(handle.SpanId) + "-01"; tc.Traceparent != want {
		t.Fatalf("handler trace %q, want %q", tc.Traceparent, want)
	}
	// Messaging attributes, and no payload.
	for _, s := range []*tracepb.Span{publish, handle, frames[0]} {
		attrs := map[string]string{}
		for _, kv := range s.Attributes {
			attrs[kv.Key] = kv.Value.GetStringValue()
		}
		if attrs["messaging.system"] != "nats" || attrs["e2a.request_id"] != "otel-1" || !strings.HasPrefix(attrs["messaging.destination.name"], "e2a.") {
			t.Fatalf("span %q attributes %v", s.Name, attrs)
		}
		for k, v := range attrs {
			if strings.Contains(v, `"text"`) || strings.Contains(v, "content") {
				t.Fatalf("span %q attribute %s carries the payload: %q", s.Name, k, v)
			}
		}
	}
}

func names(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name+"/"+hex.EncodeToString(s.TraceId)[:8])
	}
	return out
}
