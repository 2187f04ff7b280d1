package agent

import (
	"context"
	"strconv"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/tracing"
	"github.com/e2a-pipeline/pipeline/subjects"
)

const tracerName = "github.com/e2a-pipeline/pipeline/agent"

// startHandleSpan starts the consumer span of one delivery, child of the
// trace context the request carries (its publish span).
func (w *worker) startHandleSpan(subject string, env *e2a.Envelope, id string, delivery uint64) (context.Context, trace.Span) {
	ctx := tracing.Extract(context.Background(), env.Trace)
	attrs := []attribute.KeyValue{tracing.MessagingSystem, tracing.Destination(subject),
		attribute.String("messaging.operation.type", "process"),
		tracing.AttrRequestID.String(id), tracing.AttrPool.String(w.pool),
		attribute.Int64("messaging.nats.delivery", int64(delivery))}
	if env.Provenance != nil && env.Provenance.SourceProtocol != "" {
		attrs = append(attrs, tracing.AttrProtocol.String(env.Provenance.SourceProtocol))
	}
	return tracing.Tracer(tracerName).Start(ctx, "process "+w.pool, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attrs...))
}

// endHandleSpan ends a delivery's span with its outcome; an outcome that
// failed the request (its final e2a.error, but for the client's cancel) is
// an error.
func endHandleSpan(span trace.Span, outcome string) {
	span.SetAttributes(tracing.AttrOutcome.String(outcome))
	switch outcome {
	case OutcomeFailed, OutcomeDeadline, OutcomePanic, OutcomeLost, OutcomeInvalid, OutcomeMaxDeliveries, OutcomeInterrupted:
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
}

// frameSpan starts the producer span of frame seq's publish, child of the
// delivery's span, and writes its context into the frame's headers.
func (wr *writer) frameSpan(h nats.Header, seq int64) trace.Span {
	ctx, span := tracing.Tracer(tracerName).Start(wr.spanCtx, "publish e2a.resp", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(tracing.MessagingSystem, tracing.Destination(wr.subject),
			tracing.AttrRequestID.String(wr.requestID), tracing.AttrSequence.Int64(seq)))
	if tc := tracing.Inject(ctx); tc != nil {
		// Same lengths as the delivery's context, which the size bounds
		// (headerBound) counted.
		if headerSafe(tc.Traceparent) {
			h.Set(subjects.HeaderTraceparent, tc.Traceparent)
		}
		if headerSafe(tc.Tracestate) {
			h.Set(subjects.HeaderTracestate, tc.Tracestate)
		}
	}
	return span
}

// endFrameSpan ends a frame's span with the publish's error, if any.
func endFrameSpan(span trace.Span, streamSeq uint64, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(attribute.String("messaging.message.id", strconv.FormatUint(streamSeq, 10)))
	}
	span.End()
}

type traceKey struct{}

func withTrace(ctx context.Context, t *e2a.TraceContext) context.Context {
	if t == nil || t.Traceparent == "" {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, *t)
}

// TraceFrom returns the W3C trace context (traceparent, tracestate) of the
// request a handler serves: the one the client sent to ingress, carried in
// the envelope and the NATS headers, so that an agent's own spans join the
// same trace. ok is false when the request carried none.
func TraceFrom(ctx context.Context) (t e2a.TraceContext, ok bool) {
	t, ok = ctx.Value(traceKey{}).(e2a.TraceContext)
	return t, ok
}
