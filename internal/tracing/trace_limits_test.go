package tracing_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/internal/tracing"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// bigTracestate is a tracestate OpenTelemetry parses (32 list-members,
// each value under 256 characters) but far over the 512 characters the
// front door keeps (e2a.CleanTracestate drops a longer one).
func bigTracestate() string {
	members := make([]string, 32)
	for i := range members {
		members[i] = fmt.Sprintf("k%02d=%s", i, strings.Repeat("a", 200))
	}
	return strings.Join(members, ",")
}

// With tracing off, a tracestate over 512 characters was dropped at the
// front door (the normalizer); with tracing on, tracing.Handler's span
// carried the client's tracestate whatever its size (OpenTelemetry's own
// limits), and ingress's publish span replaced env.Trace with it: the
// oversized tracestate was stored with the request, handed to the handler
// and copied onto every frame's headers. Handler, Extract and Inject now
// apply e2a.CleanTrace, the normalizer's check.
func TestOversizedTracestateDroppedWithTracingOn(t *testing.T) {
	r := startRevRig(t)
	ts := bigTracestate()
	req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/requests?agent=traced",
		strings.NewReader(`{"request_id":"big-tracestate","params":{"text":"x"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", revParent)
	req.Header.Set("tracestate", ts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
	s := r.handled(t)
	subj, _ := subjects.Request("traced", "big-tracestate")
	msg, err := streams.LastBySubject(ctx, r.nc, streams.RequestsStream, subj)
	if err != nil {
		t.Fatal(err)
	}
	env, _ := e2a.FromJSON(msg.Data)
	stored := ""
	if env != nil && env.Trace != nil {
		stored = env.Trace.Tracestate
	}
	if n := len(msg.Header.Get("tracestate")); n > 512 || len(stored) > 512 || len(s.trace.Tracestate) > 512 {
		t.Fatalf("a %d-character tracestate was kept: request header %d, envelope trace %d, agent.TraceFrom %d characters "+
			"(with tracing off the front door drops any over 512)", len(ts), n, len(stored), len(s.trace.Tracestate))
	}
}

// tracing.Handler named the server span "HTTP <method>" and recorded
// http.request.method with whatever method the client sent: a client
// sending arbitrary methods made arbitrary span names (unbounded
// cardinality in the tracing backend's operations). OpenTelemetry's HTTP
// conventions record an unknown method as _OTHER and name the span
// "HTTP", as Handler now does.
func TestHandlerSpanNameOfUnknownMethod(t *testing.T) {
	exp, p := memTracing(t)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/requests", func(w http.ResponseWriter, r *http.Request) {})
	srv := httptest.NewServer(tracing.Handler(mux, "/healthz"))
	t.Cleanup(srv.Close)

	const method = "RANDOM-7f3a9c"
	req, _ := http.NewRequest(method, srv.URL+"/v1/requests/r-1", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err := p.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	ss := exp.GetSpans()
	if len(ss) != 1 {
		t.Fatalf("%d spans, want 1", len(ss))
	}
	var attr string
	for _, kv := range ss[0].Attributes {
		if kv.Key == "http.request.method" {
			attr = kv.Value.Emit()
		}
	}
	if strings.Contains(ss[0].Name, method) || attr == method || ss[0].Name != "HTTP" || attr != "_OTHER" {
		t.Fatalf("span %q with http.request.method=%q: the client's method %q is in the span name and attribute "+
			"(want \"HTTP\" and _OTHER for an unknown method)", ss[0].Name, attr, method)
	}
}

// An envelope an integrator published straight onto e2a.req.<pool>.<id>
// kept its "trace" unchecked: the agent runtime handed an invalid
// traceparent to the handler (agent.TraceFrom) and copied it onto every
// frame's headers, where W3C Trace Context says it must not be
// propagated. The agent now applies e2a.CleanTrace as it reads a request.
func TestDirectPublishInvalidTraceDropped(t *testing.T) {
	r := startRevRigTracing(t, false)
	const bad = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01" // upper case: invalid
	subj, _ := subjects.Request("traced", "direct-bad-trace")
	env := `{"protocol_version":"` + e2a.ProtocolVersion + `","request_id":"direct-bad-trace","method":"e2a.request",` +
		`"channel":"nats","timestamp":"2026-01-01T00:00:00Z","params":{"text":"x"},` +
		`"trace":{"traceparent":"` + bad + `","tracestate":"k=v"}}`
	m := &nats.Msg{Subject: subj, Data: []byte(env), Header: nats.Header{}}
	m.Header.Set(subjects.HeaderMsgID, "direct-bad-trace")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := streams.Publish(ctx, r.nc, m); err != nil {
		t.Fatal(err)
	}
	s := r.handled(t)
	if s.trace != (e2a.TraceContext{}) {
		t.Fatalf("the handler saw the invalid trace context %+v", s.trace)
	}
	respSubj, _ := subjects.Response("direct-bad-trace")
	var last streams.RawMsg
	testkit.Eventually(t, 10*time.Second, "the final frame stored", func() bool {
		msg, err := streams.LastBySubject(ctx, r.nc, streams.ResponsesStream, respSubj)
		if err != nil {
			return false
		}
		last = msg
		return strings.Contains(string(msg.Data), `"is_final":true`)
	})
	if tp, ts := last.Header.Get("traceparent"), last.Header.Get("tracestate"); tp != "" || ts != "" {
		t.Fatalf("a frame carries traceparent %q, tracestate %q: the invalid trace context was propagated", tp, ts)
	}
}
