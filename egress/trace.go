package egress

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/tracing"
	"github.com/e2a-pipeline/pipeline/subjects"
)

const tracerName = "github.com/e2a-pipeline/pipeline/egress"

type requestTraceKey struct{}

// withRequestTrace returns ctx carrying the trace context of the stored
// request message req (its publish span), for Stream's span. Only with
// tracing on.
func withRequestTrace(ctx context.Context, req *nats.Msg) context.Context {
	if req == nil || req.Header == nil {
		return ctx
	}
	tp := req.Header.Get(subjects.HeaderTraceparent)
	if tp == "" {
		return ctx
	}
	sc := trace.SpanContextFromContext(tracing.Extract(context.Background(),
		&e2a.TraceContext{Traceparent: tp, Tracestate: req.Header.Get(subjects.HeaderTracestate)}))
	if !sc.IsValid() {
		return ctx
	}
	return context.WithValue(ctx, requestTraceKey{}, sc)
}

// startStreamSpan starts the span of one stream or replay of requestID.
// Its parent is the span in ctx (the HTTP request's) when that is in the
// request's trace or the request's trace is unknown; otherwise the
// request's publish span, linked to the HTTP request's span.
// Without the request's trace context in ctx (withRequestTrace), it reads
// the stored request (one direct get, with tracing on only), so that a
// client's later, separate call joins the request's trace.
func (s *Service) startStreamSpan(ctx context.Context, format, requestID string, from int64) (context.Context, trace.Span) {
	if _, known := ctx.Value(requestTraceKey{}).(trace.SpanContext); !known {
		if msg, err := lookupRequest(ctx, s.mux, s.streamNames().requests, requestID); err == nil {
			ctx = withRequestTrace(ctx, msg)
		}
	}
	parent := ctx
	var opts []trace.SpanStartOption
	cur := trace.SpanContextFromContext(ctx)
	if req, ok := ctx.Value(requestTraceKey{}).(trace.SpanContext); ok && (!cur.IsValid() || cur.TraceID() != req.TraceID()) {
		parent = trace.ContextWithRemoteSpanContext(ctx, req)
		if cur.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: cur}))
		}
	}
	opts = append(opts, trace.WithAttributes(tracing.MessagingSystem,
		attribute.String("messaging.operation.type", "receive"),
		tracing.AttrRequestID.String(requestID), tracing.AttrFormat.String(format),
		attribute.Int64("e2a.from", from)))
	return tracing.Tracer(tracerName).Start(parent, "egress "+format, opts...)
}

// endStreamSpan ends a stream's span with its frame count and error.
func endStreamSpan(span trace.Span, frames int, err error) {
	span.SetAttributes(attribute.Int("e2a.frames", frames))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
