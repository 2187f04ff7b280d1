package push_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/e2a-pipeline/pipeline/internal/tracing"
	"github.com/e2a-pipeline/pipeline/push"
)

// TestDeliverySpans: with tracing on, each POST of an update is a client
// span in the trace of the request whose frame it renders (the agent's
// process span's trace), with the request id, event id, config id, status
// and outcome, and neither the webhook URL nor the token. Once the stage
// has handled the last update (its cursor there), every POST's span is
// ended: as many spans as deliveries.
func TestDeliverySpans(t *testing.T) {
	spans := traced(t)
	e := newEnv(t)
	e.startStage()
	r := newReceiver(t, nil)
	e.create("alice", push.Config{TaskID: "t1", URL: r.srv.URL + "/hook?sig=url-secret", Token: "tok-trace"})
	id := e.turn("alice", "t1", "", "", 3)
	e.handled("alice", "t1", r)
	var requestTrace trace.TraceID
	var posts []tracetest.SpanStub
	for _, s := range spans() {
		attrs := spanAttrs(s)
		for k, v := range attrs {
			if strings.Contains(v, "tok-trace") || strings.Contains(v, "url-secret") {
				t.Errorf("span %s: attribute %s = %q", s.Name, k, v)
			}
		}
		if attrs["e2a.request_id"] != id {
			continue
		}
		switch {
		case strings.HasPrefix(s.Name, "process "):
			requestTrace = s.SpanContext.TraceID()
		case s.Name == "push POST":
			if s.SpanKind != trace.SpanKindClient || attrs["e2a.outcome"] != "delivered" || attrs["http.response.status_code"] != "200" ||
				attrs["e2a.push.event_id"] == "" || attrs["e2a.push.config_id"] == "" || !s.Parent.IsValid() {
				t.Errorf("push span %+v", attrs)
			}
			posts = append(posts, s)
		}
	}
	if !requestTrace.IsValid() || len(posts) != len(r.accepted()) {
		t.Fatalf("request trace %v, %d push spans for %d deliveries", requestTrace, len(posts), len(r.accepted()))
	}
	for _, s := range posts {
		if s.SpanContext.TraceID() != requestTrace {
			t.Errorf("push span of %v in trace %v, the request's is %v", s.Attributes, s.SpanContext.TraceID(), requestTrace)
		}
	}
}

// TestGoneSpan: the POST a webhook answers 410 Gone (the receiver ending
// the subscription: its config deleted) is a span whose outcome is gone,
// not refused as another 4xx's (the update dead-lettered) still is.
// Before, a 410's span said refused.
func TestGoneSpan(t *testing.T) {
	for _, c := range []struct {
		status  int
		outcome string
	}{{http.StatusGone, "gone"}, {http.StatusNotFound, "refused"}} {
		t.Run(strconv.Itoa(c.status), func(t *testing.T) {
			spans := traced(t)
			g := runGoneTask(t, always(c.status), func(base string) string { return base })
			var got []string
			for _, s := range spans() {
				if a := spanAttrs(s); s.Name == "push POST" && a["e2a.push.config_id"] == g.c.ID {
					if a["http.response.status_code"] != strconv.Itoa(c.status) {
						t.Errorf("span of a POST answered %d: status %s", c.status, a["http.response.status_code"])
					}
					got = append(got, a["e2a.outcome"])
				}
			}
			if len(got) == 0 || len(got) != len(g.gone.all()) {
				t.Fatalf("%d spans of the webhook's %d POSTs", len(got), len(g.gone.all()))
			}
			for _, o := range got {
				if o != c.outcome {
					t.Errorf("outcomes %v of POSTs answered %d, want %s", got, c.status, c.outcome)
					break
				}
			}
		})
	}
}

// traced starts tracing, its spans kept in memory, for the test: spans
// flushes and returns those ended so far.
func traced(t *testing.T) (spans func() tracetest.SpanStubs) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	p, err := tracing.Start(context.Background(), tracing.WithExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return func() tracetest.SpanStubs {
		t.Helper()
		if err := p.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
		return exp.GetSpans()
	}
}

// spanAttrs is s's attributes by key, their values as emitted.
func spanAttrs(s tracetest.SpanStub) map[string]string {
	attrs := map[string]string{}
	for _, a := range s.Attributes {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	return attrs
}
