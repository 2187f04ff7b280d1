package bridge

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/trace"

	"github.com/e2a-pipeline/pipeline/internal/tracing"
)

const tracerName = "github.com/e2a-pipeline/pipeline/bridge"

// startCallSpan starts the client span of one HTTP call to the upstream
// (each attempt of a retried call, each poll and resubscription its own),
// child of ctx's span (the request's process span): the upstream's
// traceparent then names it, and a trace shows each attempt, its status
// and the time to its answer's head (a streamed body is read after).
// tracing.StartClientSpan: its attributes are the method, the upstream's
// scheme, host and port (never its path or query: a key may ride in
// either). With tracing off it is a no-op span and ctx's own context is
// sent.
func startCallSpan(ctx context.Context, r *http.Request) (context.Context, trace.Span) {
	return tracing.StartClientSpan(ctx, tracerName, r)
}

// endCallSpan ends a call's span with its answer's status, or err
// (tracing.EndClientSpan): a transport failure or a status of 400 or more
// is an error, its event's message without the URL's path or query and
// scrubbed by scrub (the client's Scrub: credentials, query values, path
// tokens).
func endCallSpan(span trace.Span, resp *http.Response, err error, scrub func(string) string) {
	tracing.EndClientSpan(span, resp, err, scrub)
}
