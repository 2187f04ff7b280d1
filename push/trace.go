package push

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/tracing"
	"github.com/e2a-pipeline/pipeline/subjects"
)

const tracerName = "github.com/e2a-pipeline/pipeline/push"

// Span attributes of a delivery (besides e2a.request_id and e2a.outcome).
var (
	attrEventID  = attribute.Key("e2a.push.event_id")
	attrConfigID = attribute.Key("e2a.push.config_id")
)

// deliverySpan starts the client span of one POST of an update, child of
// the trace context of the response frame it renders (the agent's frame
// publish, in the request's trace), so a delivery shows under its
// request. Neither the URL (it may hold a secret in its query), the token
// nor the credentials are recorded. Without tracing it returns ctx and a
// no-op span.
func deliverySpan(ctx context.Context, it item, ev event) (context.Context, trace.Span) {
	if !tracing.Enabled() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	if it.job != nil {
		h := it.job.header
		if it.job.msg != nil {
			h = it.job.msg.Headers()
		}
		if h != nil && h.Get(subjects.HeaderTraceparent) != "" {
			ctx = tracing.Extract(ctx, &e2a.TraceContext{Traceparent: h.Get(subjects.HeaderTraceparent),
				Tracestate: h.Get(subjects.HeaderTracestate)})
		}
	}
	attrs := []attribute.KeyValue{attrEventID.String(ev.id), attrConfigID.String(it.ref.id)}
	if it.job != nil && it.job.m != nil {
		attrs = append(attrs, tracing.AttrRequestID.String(it.job.m.requestID))
	}
	return tracing.Tracer(tracerName).Start(ctx, "push POST", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrs...))
}

// endDeliverySpan ends a delivery's span with its outcome: delivered,
// retry (a transient failure), gone (410 Gone: the receiver ended the
// subscription, its config is deleted) or refused (another permanent
// failure: the update is dead-lettered).
func endDeliverySpan(span trace.Span, out attempt) {
	if !span.IsRecording() {
		return
	}
	if out.status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", out.status))
	}
	switch {
	case out.ok:
		span.SetAttributes(tracing.AttrOutcome.String("delivered"))
	case out.gone:
		span.SetAttributes(tracing.AttrOutcome.String("gone"))
		span.SetStatus(codes.Error, out.reason)
	case out.permanent:
		span.SetAttributes(tracing.AttrOutcome.String("refused"))
		span.SetStatus(codes.Error, out.reason)
	default:
		span.SetAttributes(tracing.AttrOutcome.String("retry"))
		span.SetStatus(codes.Error, out.reason)
	}
	span.End()
}
