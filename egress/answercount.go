package egress

import (
	"context"
	"errors"
	"io"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/e2a-pipeline/pipeline/internal/tracing"
)

// CountedAs has a read opened by [Service.OpenReader] or
// [Service.OpenPrepared] counted and spanned as a response of format
// (the metrics' label: one of [Formats], or [FormatA2AV1JSON] or
// [FormatA2AV1GRPC], which no renderer writes), as the Service's own streams are: a
// protocol's answer made of values or events rather than a rendered stream
// (A2A v1.0's SendMessage, SendStreamingMessage and SubscribeToTask
// through its SDK). The response is open from the read's opening to its
// Close; each frame Next gives is one written (the first its time to first
// frame); its outcome is the last error Next returned: none after the final
// frame (final), the server's shutdown (shutdown), a client too slow
// (the context ended with the cause [ErrSlowClient]: slow_client, counted
// in e2a_egress_slow_client_disconnects_total too), the client gone (the
// context's end, or a Close before the final frame: client_gone), or as a
// stream's. A read of [Open] is not counted.
func CountedAs(format string) ReplayOption {
	return func(c *replayConfig) error { c.countAs = format; return nil }
}

// answerCount is the account of a read opened with CountedAs.
type answerCount struct {
	s         *Service
	ctx       context.Context
	requestID string
	from      int64
	format    string
	start     time.Time
	span      trace.Span
	frames    int
	err       error
	final     bool
	ended     bool
}

func (s *Service) newAnswerCount(ctx context.Context, requestID string, from int64) *answerCount {
	return &answerCount{s: s, ctx: ctx, requestID: requestID, from: from, start: time.Now()}
}

// option takes the format CountedAs set, and has the reader keep the
// account when there is one.
func (a *answerCount) option(c *replayConfig) error {
	if c.countAs != "" {
		a.format, c.count = c.countAs, a
	}
	return nil
}

// opened starts the response's account when the read is counted: a read
// that did not open ends it at once with its error.
func (a *answerCount) opened(rd *Reader, err error) (*Reader, error) {
	if a.format == "" {
		return rd, err
	}
	a.s.m.open.WithLabelValues(a.format).Inc()
	if tracing.Enabled() {
		_, a.span = a.s.startStreamSpan(a.ctx, a.format, a.requestID, a.from)
	}
	if err != nil {
		a.err = err
		a.end()
	}
	return rd, err
}

// read accounts for one Next: a frame (final: the request's final frame),
// the EOF after it, or the error that ends the read.
func (a *answerCount) read(final bool, err error) {
	switch {
	case err == nil:
		a.final = a.final || final
		a.frames++
		a.s.m.frames.WithLabelValues(a.format).Inc()
		if a.frames == 1 {
			a.s.m.ttff.WithLabelValues(a.format).Observe(time.Since(a.start).Seconds())
		}
	case errors.Is(err, io.EOF):
		a.final = true
	default:
		a.err = err
	}
}

// end closes the account: the open gauge, the outcome, the span.
func (a *answerCount) end() {
	if a.ended {
		return
	}
	a.ended = true
	a.s.m.open.WithLabelValues(a.format).Dec()
	outcome := a.outcome()
	if outcome == "slow_client" {
		a.s.m.slow.WithLabelValues(a.format).Inc()
		a.s.log.Warn("egress: slow client disconnected", "format", a.format, "reason", "write blocked longer than the write timeout", "timeout", a.s.cfg.writeTimeout)
	}
	a.s.m.outcomes.WithLabelValues(a.format, outcome).Inc()
	if a.span != nil {
		endStreamSpan(a.span, a.frames, a.err)
	}
}

func (a *answerCount) outcome() string {
	err := a.err
	switch {
	case a.final && err == nil:
		return "final"
	case ShuttingDown(a.ctx, err), errors.Is(err, ErrShuttingDown):
		return "shutdown"
	case errors.Is(context.Cause(a.ctx), ErrSlowClient):
		// Cut off by its binding for not reading (A2A v1.0's gRPC
		// streams): its context's cause.
		return "slow_client"
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// Closed before the final frame: the caller stopped reading (its
		// client gone, or its answer given: a stream refused mid-way).
		return "client_gone"
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrFramesExpired):
		return "not_found"
	case errors.Is(err, ErrWaitTimeout):
		return "timeout"
	default:
		return "error"
	}
}
