package bridge

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

	"github.com/e2a-pipeline/pipeline/internal/tracing"
	"github.com/e2a-pipeline/pipeline/redact"
)

const tracerName = "github.com/e2a-pipeline/pipeline/bridge"

// startCallSpan starts the client span of one HTTP call to the upstream
// (each attempt of a retried call, each poll and resubscription its own),
// child of ctx's span (the request's process span): the upstream's
// traceparent then names it, and a trace shows each attempt, its status
// and the time to its answer's head (a streamed body is read after). Its
// attributes are the method, the upstream's scheme, host and port (never
// its path or query: a key may ride in either), set only on a span that
// records. With tracing off it is a no-op span and ctx's own context is
// sent.
func startCallSpan(ctx context.Context, r *http.Request) (context.Context, trace.Span) {
	if !tracing.Enabled() {
		// The stages make no span (tracing.Enabled): a no-op span, not
		// ctx's own, which endCallSpan would end.
		return ctx, trace.SpanFromContext(context.Background())
	}
	ctx, span := tracing.Tracer(tracerName).Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(attribute.String("http.request.method", r.Method),
		attribute.String("url.scheme", r.URL.Scheme), attribute.String("server.address", r.URL.Hostname()))
	if p, err := strconv.Atoi(r.URL.Port()); err == nil {
		span.SetAttributes(attribute.Int("server.port", p))
	}
	return ctx, span
}

// endCallSpan ends a call's span with its answer's status, or err: a
// transport failure or a status of 400 or more is an error. The error's
// event holds err's message as scrub leaves it (the client's Scrub: its
// credentials, its URL's query values and path tokens), the URL an
// *url.Error quotes cut to its scheme and host first (redact.URL), as
// the span's attributes never hold the upstream's path or query.
func endCallSpan(span trace.Span, resp *http.Response, err error, scrub func(string) string) {
	if !span.IsRecording() {
		span.End()
		return
	}
	switch {
	case err != nil:
		span.AddEvent(semconv.ExceptionEventName, trace.WithAttributes(semconv.ExceptionType(fmt.Sprintf("%T", err)),
			semconv.ExceptionMessage(spanError(err, scrub))))
		span.SetStatus(codes.Error, "upstream call failed")
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
