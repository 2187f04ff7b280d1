package bridge

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// ending is an upstream whose call waits for the request's end (when
// wait), then returns what ret makes of the request's context.
type ending struct {
	wait bool
	ret  func(ctx context.Context) error
}

func (e *ending) Name() string { return "ending http://upstream" }

func (e *ending) Call(ctx context.Context, _ *e2a.Envelope, _ agent.Writer) error {
	if e.wait {
		<-ctx.Done()
	}
	return e.ret(ctx)
}

// TestRequestEndIsNotTheUpstreams: a call that ends because the request
// did (its deadline, its cancel), however the upstream reports it (the
// context's error, wrapped, already classified, or the context's cause),
// is the request's end: returned as the context's error and counted
// outcome cancelled, never upstream_timeout (the request's own deadline
// paged an operator for an upstream that answered in time) or
// upstream_protocol_error. A deadline of the client's own while the
// request lives is still the upstream's timeout, and a writer fenced
// stays the runtime's error.
func TestRequestEndIsNotTheUpstreams(t *testing.T) {
	deadline := func() (context.Context, context.CancelFunc) {
		return context.WithDeadlineCause(context.Background(), time.Now().Add(20*time.Millisecond), agent.ErrDeadlineExceeded)
	}
	cancelled := func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancelCause(context.Background())
		stop := time.AfterFunc(20*time.Millisecond, func() { cancel(agent.ErrCancelled) })
		return ctx, func() { stop.Stop(); cancel(nil) }
	}
	for _, c := range []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		up      *ending
		outcome string
		is      error
	}{
		{"deadline, ctx.Err()", deadline, &ending{wait: true, ret: func(ctx context.Context) error { return ctx.Err() }},
			"cancelled", context.DeadlineExceeded},
		{"deadline, classified by the upstream", deadline, &ending{wait: true, ret: func(ctx context.Context) error { return Classify(ctx.Err()) }},
			"cancelled", context.DeadlineExceeded},
		{"deadline, its cause (an HTTP agent's)", deadline, &ending{wait: true, ret: context.Cause},
			"cancelled", context.DeadlineExceeded},
		{"cancel, its cause", cancelled, &ending{wait: true, ret: context.Cause}, "cancelled", context.Canceled},
		{"the client's own timeout", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			&ending{ret: func(context.Context) error { return context.DeadlineExceeded }}, CodeTimeout, nil},
		{"fenced", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancelCause(context.Background())
			stop := time.AfterFunc(20*time.Millisecond, func() { cancel(agent.ErrFenced) })
			return ctx, func() { stop.Stop(); cancel(nil) }
		}, &ending{wait: true, ret: func(context.Context) error { return agent.ErrFenced }}, "error", agent.ErrFenced},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, _ := newTestHandler(t, c.up, WithMetrics(prometheus.NewRegistry()))
			ctx, cancel := c.ctx()
			defer cancel()
			err := h.Serve(ctx, &e2a.Envelope{RequestID: "r"}, &recWriter{})
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("Serve returned %v, want %v", err, c.is)
			}
			if got := testutil.ToFloat64(h.m.calls.WithLabelValues("p", c.up.Name(), c.outcome)); got != 1 {
				t.Errorf("outcome %s counted %v times (Serve returned %v)", c.outcome, got, err)
			}
		})
	}
}
