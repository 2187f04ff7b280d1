package push_test

import (
	"context"
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
	exp := tracetest.NewInMemoryExporter()
	p, err := tracing.Start(context.Background(), tracing.WithExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	e := newEnv(t)
	e.startStage()
	r := newReceiver(t, nil)
	e.create("alice", push.Config{TaskID: "t1", URL: r.srv.URL + "/hook?sig=url-secret", Token: "tok-trace"})
	id := e.turn("alice", "t1", "", "", 3)
	e.handled("alice", "t1", r)
	if err := p.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var requestTrace trace.TraceID
	var posts []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		attrs := map[string]string{}
		for _, a := range s.Attributes {
			attrs[string(a.Key)] = a.Value.Emit()
			if strings.Contains(a.Value.Emit(), "tok-trace") || strings.Contains(a.Value.Emit(), "url-secret") {
				t.Errorf("span %s: attribute %s = %q", s.Name, a.Key, a.Value.Emit())
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
