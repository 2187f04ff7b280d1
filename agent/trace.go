package agent

import (
	"context"

	"github.com/e2a-pipeline/pipeline/e2a"
)

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
