package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/e2a-pipeline/pipeline/redact"
)

// StartClientSpan starts the client span of one outbound HTTP call r (a
// bridge's call to its upstream, a workflow's ApiCall) with tracer,
// child of ctx's span: the traceparent the caller then sends (Inject of
// the context returned) names it. It is named by the method (a known one,
// else "HTTP", as Handler's spans are); its attributes are the method,
// the scheme, host and port of r's URL (never its path or query: a key
// may ride in either), set only on a span that records. With tracing off
// it returns ctx and a no-op span, and allocates nothing.
func StartClientSpan(ctx context.Context, tracer string, r *http.Request) (context.Context, trace.Span) {
	if !Enabled() {
		// The stages make no span: a no-op span, not ctx's own, which
		// EndClientSpan would end.
		return ctx, trace.SpanFromContext(context.Background())
	}
	method, name := spanMethod(r.Method)
	if name != "HTTP" {
		name = method
	}
	ctx, span := Tracer(tracer).Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(attribute.String("http.request.method", method),
		attribute.String("url.scheme", r.URL.Scheme), attribute.String("server.address", r.URL.Hostname()))
	if p, err := strconv.Atoi(r.URL.Port()); err == nil {
		span.SetAttributes(attribute.Int("server.port", p))
	}
	return ctx, span
}

// EndClientSpan ends a call's span with its answer's status, or err: a
// transport failure or a status of 400 or more is an error. The error's
// event holds err's message with the URL an *url.Error quotes cut to its
// scheme and host (redact.URL), as the span's attributes never hold the
// path or query, then as scrub leaves it (the caller's own secrets: a
// bridge's credentials, a workflow's vault values; nil: none).
func EndClientSpan(span trace.Span, resp *http.Response, err error, scrub func(string) string) {
	if !span.IsRecording() {
		span.End()
		return
	}
	switch {
	case err != nil:
		span.AddEvent(semconv.ExceptionEventName, trace.WithAttributes(semconv.ExceptionType(fmt.Sprintf("%T", err)),
			semconv.ExceptionMessage(spanError(err, scrub))))
		span.SetStatus(codes.Error, "call failed")
	case resp != nil:
		span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
		if resp.StatusCode >= 400 {
			span.SetStatus(codes.Error, strconv.Itoa(resp.StatusCode))
		}
	}
	span.End()
}

// spanError is err's message for a span: the URL of an *url.Error in it
// as redact.URL shows it (the transport quotes the whole URL), then
// scrubbed by scrub (nil: not).
func spanError(err error, scrub func(string) string) string {
	msg := err.Error()
	if ue := (*url.Error)(nil); errors.As(err, &ue) && ue.URL != "" {
		msg = strings.ReplaceAll(msg, ue.URL, redact.URL(ue.URL))
	}
	if scrub != nil {
		msg = scrub(msg)
	}
	return msg
}
