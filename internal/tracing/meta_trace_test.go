package tracing_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

const (
	metaTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	metaSpan    = "00f067aa0ba902b7"
	metaParent  = "00-" + metaTraceID + "-" + metaSpan + "-01"
)

// TestTraceACPPromptMetaOverHTTP: an ACP prompt over HTTP whose trace
// context is in params._meta (traceparent: the root key ACP reserves for
// it) and not in a header is in _meta's trace, as over stdio: the
// request's publish span is the child of _meta's context and links the
// call's HTTP server span (a root: the body is read after that span
// starts); the handler's context and span follow. It was the child of
// that server span, in a trace of its own, _meta's ignored. With a
// traceparent header too, the header wins (the server span's parent, the
// door's rule for a body's trace context): the usual chain.
func TestTraceACPPromptMetaOverHTTP(t *testing.T) {
	r := startRevRig(t)
	prompt := `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"` + r.acpSession(t) +
		`","prompt":[{"type":"text","text":"hi"}],"_meta":{"traceparent":"` + metaParent + `","tracestate":"congo=t61rcWkgMzE"}}}`
	code, body := r.postTraced(t, "/pools/traced/acp", "", prompt, "")
	if code != http.StatusOK || !strings.Contains(body, "end_turn") {
		t.Fatalf("session/prompt: %d %s", code, body)
	}
	checkBodyTrace(t, r, r.handled(t))
	// Both: the header's trace, as every door takes a header over a
	// body's trace context.
	code, body = r.post(t, "/pools/traced/acp", "", strings.Replace(prompt, `"id":2`, `"id":3`, 1))
	if code != http.StatusOK || !strings.Contains(body, "end_turn") {
		t.Fatalf("session/prompt with a header: %d %s", code, body)
	}
	r.checkChain(t, r.handled(t))
}

// An E2A request over HTTP whose trace context is its envelope's trace
// and not a header (the door keeps the body's then): the same chain as
// TestTraceACPPromptMetaOverHTTP's, in the body's trace.
func TestTraceE2ABodyTraceOverHTTP(t *testing.T) {
	r := startRevRig(t)
	code, body := r.postTraced(t, "/v1/requests?agent=traced", "text/event-stream",
		`{"request_id":"rev-body-trace","params":{"text":"x"},"trace":{"traceparent":"`+metaParent+`"}}`, "")
	if code != http.StatusOK || !strings.Contains(body, "e2a.complete") {
		t.Fatalf("POST SSE: %d %s", code, body)
	}
	checkBodyTrace(t, r, r.handled(t))
}

// checkBodyTrace checks that the handler's span s is in the trace of
// metaParent, a request's trace context sent in its body, child of a
// "publish e2a.req" span, itself the child of metaParent's span and
// linking the door's HTTP server span.
func checkBodyTrace(t *testing.T, r *revRig, s revSeen) {
	t.Helper()
	if !strings.Contains(s.trace.Traceparent, metaTraceID) || s.span.TraceID().String() != metaTraceID {
		t.Fatalf("handler trace %q / span %s, want _meta's trace %s", s.trace.Traceparent, s.span.TraceID(), metaTraceID)
	}
	var ss tracetest.SpanStubs
	testkit.Eventually(t, 10*time.Second, "the handling span exported", func() bool {
		ss = r.spans(t)
		return spanByID(ss, s.span.SpanID()) != nil
	})
	pub := spanByID(ss, spanByID(ss, s.span.SpanID()).Parent.SpanID())
	if pub == nil || pub.Name != "publish e2a.req" {
		t.Fatalf("parent of the handler's span is %v, want publish e2a.req", pub)
	}
	if pub.Parent.SpanID().String() != metaSpan || pub.Parent.TraceID().String() != metaTraceID || !pub.Parent.IsRemote() {
		t.Fatalf("publish e2a.req parent %s/%s, want _meta's %s/%s", pub.Parent.TraceID(), pub.Parent.SpanID(), metaTraceID, metaSpan)
	}
	if len(pub.Links) != 1 {
		t.Fatalf("publish e2a.req links %v, want the call's server span", pub.Links)
	}
	if srv := spanByID(ss, pub.Links[0].SpanContext.SpanID()); srv == nil || srv.SpanKind != trace.SpanKindServer || !strings.HasPrefix(srv.Name, "HTTP POST ") {
		t.Fatalf("publish e2a.req links %v, want the call's server span", pub.Links[0].SpanContext)
	}
}
