package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
	"github.com/e2a-pipeline/pipeline/internal/option"
	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
)

// Upstream is an agent outside the pipeline, reached by one protocol.
type Upstream interface {
	// Name names the upstream in metrics and logs: its kind and address,
	// never a credential (e.g. "openai http://localhost:8000").
	Name() string
	// Call sends env to the upstream and writes its answer through w as
	// the request's frames, ending with the final one (or returning an
	// error for the runtime to end it: an *Error, or any error Classify
	// reads). ctx is done when the request is cancelled, past its deadline
	// or handed back.
	Call(ctx context.Context, env *e2a.Envelope, w agent.Writer) error
}

// Scrubber is an Upstream that knows the credentials it sends (its
// Client's: bridge.Client.Scrub). The Handler scrubs every upstream error
// message with it before the message is logged or written as the
// request's e2a.error frame, and every frame the upstream fills with its
// own words but the answer's streamed content (scrubframes.go: final
// frames, failed ones, interrupts, status messages): an upstream (or a
// proxy before it) may quote the request's headers in an error or a
// status, in any answer, 2xx streams included.
type Scrubber interface {
	Scrub(s string) string
}

// Option configures New.
type Option func(*config) error

type config struct {
	maxInFlight int
	retries     int
	maxAnswer   int64
	base, cap   time.Duration
	reg         prometheus.Registerer
	log         *slog.Logger
	sleep       func(context.Context, time.Duration) error
}

// WithMaxInFlight bounds the upstream calls in flight at once in this
// process (≥ 1, default 64); requests beyond it wait for a slot.
func WithMaxInFlight(n int) Option {
	return option.Check(ErrInvalidOption, n >= 1, func(c *config) { c.maxInFlight = n }, "max in flight %d must be ≥ 1", n)
}

// WithRetry sets how a call that failed retryably before writing anything
// (and not ErrSentUnanswered) is retried: at most retries more times (0..20, default 3), waiting a
// random time up to base·2^attempt, at most max (full jitter), or the
// upstream's Retry-After when it is longer (bounded by max).
func WithRetry(retries int, base, max time.Duration) Option {
	return option.Check(ErrInvalidOption, retries >= 0 && retries <= 20 && base > 0 && max >= base,
		func(c *config) { c.retries, c.base, c.cap = retries, base, max },
		"retry %d, %v..%v (want 0..20 retries, 0 < base ≤ max)", retries, base, max)
}

// Bounds of WithMaxAnswerBytes.
const (
	// DefaultMaxAnswerBytes is the default bound on the bytes of one
	// upstream answer's frames.
	DefaultMaxAnswerBytes = 64 << 20
	// MinAnswerBytes is the least bound WithMaxAnswerBytes takes.
	MinAnswerBytes = 1 << 10
)

// WithMaxAnswerBytes bounds the bytes of the frames one upstream answer
// writes for a request (≥ MinAnswerBytes, default DefaultMaxAnswerBytes):
// each frame's body as its JSON is stored (a text delta's escaped
// string, a result, an error's message…) and the metadata it carries;
// text and reasoning deltas as the runtime coalesces them (their kind and
// metadata once per agent.DefaultCoalesceBytes of text), so an answer of
// many small deltas reaches about the bound in text. The frame that would
// pass the bound is not written: the upstream's answer is read no
// further, its call cancelled, and the request ends with
// upstream_protocol_error, not retryable (ErrAnswerTooLarge), the frames
// before it kept. A final e2a.complete frame that would pass it is refused
// as one larger than a frame is (agent.ErrFrameTooLarge, the bound's
// *Error too): the A2A and OpenAI bridges then write it without the text
// their deltas hold (text_omitted, content_omitted), so an answer of more
// than half the bound completes. One answer cannot fill the responses
// stream (E2A_RESPONSES, DiscardOld) and so evict every other request's
// frames.
func WithMaxAnswerBytes(n int64) Option {
	return option.Check(ErrInvalidOption, n >= MinAnswerBytes, func(c *config) { c.maxAnswer = n },
		"max answer bytes %d must be ≥ %d", n, MinAnswerBytes)
}

// WithMetrics registers the bridge's metrics (e2a_bridge_*) with r.
func WithMetrics(r prometheus.Registerer) Option {
	return option.NotNil(ErrInvalidOption, "registerer", r, func(c *config) { c.reg = r })
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return option.NotNil(ErrInvalidOption, "logger", l, func(c *config) { c.log = l })
}

// Handler is an Upstream served as an agent.Handler (see the package
// documentation for what it adds).
type Handler struct {
	pool  string
	up    Upstream
	cfg   config
	slots chan struct{}
	m     *metrics
	// models are the model labels of the pool's token series.
	models modelLabels
	// scrub is the upstream's Scrub when it is a Scrubber (bound once:
	// a method value per request was an allocation).
	scrub func(string) string
}

var (
	_ agent.Handler          = (*Handler)(nil)
	_ agent.Resumer          = (*Handler)(nil)
	_ agent.TurnCanceller    = (*Handler)(nil)
	_ agent.RequestCanceller = (*Handler)(nil)
)

// New returns the handler of pool that calls up. Errors wrap
// ErrInvalidOption, or are the metrics' registration errors.
func New(pool string, up Upstream, opts ...Option) (*Handler, error) {
	if up == nil || pool == "" {
		return nil, fmt.Errorf("%w: a pool and an upstream are required", ErrInvalidOption)
	}
	c, err := configOf(opts)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(c.reg)
	if err != nil {
		return nil, err
	}
	h := &Handler{pool: pool, up: up, cfg: c, slots: make(chan struct{}, c.maxInFlight), m: m}
	if s, ok := up.(Scrubber); ok {
		h.scrub = s.Scrub
	}
	return h, nil
}

// configOf is the configuration opts make of the defaults.
func configOf(opts []Option) (config, error) {
	c := config{maxInFlight: 64, retries: 3, maxAnswer: DefaultMaxAnswerBytes, base: 200 * time.Millisecond, cap: 10 * time.Second, log: slog.Default(), sleep: sleepctx.Sleep}
	return c, option.Apply(ErrInvalidOption, &c, opts)
}

// CheckOptions returns the error New would return for opts (matching
// ErrInvalidOption), for a command that checks its settings before it
// calls the upstream or publishes anything.
func CheckOptions(opts ...Option) error {
	_, err := configOf(opts)
	return err
}

// Resumable reports whether the upstream can resume a request another
// worker started (an Upstream implementing agent.Resumer says so itself).
func (h *Handler) Resumable() bool {
	r, ok := h.up.(agent.Resumer)
	return ok && r.Resumable()
}

// CancelTurn tells an upstream that implements agent.TurnCanceller of a
// cancel turn (the cancel of a task whose last turn ended interrupted:
// an A2A upstream cancels its own task); for any other upstream there is
// nothing to tell. The turn ends cancelled whatever it returns; an error
// is the upstream's refusal (an *Error), which the runtime records.
func (h *Handler) CancelTurn(ctx context.Context, env *e2a.Envelope) error {
	tc, ok := h.up.(agent.TurnCanceller)
	if !ok {
		return nil
	}
	return h.cancelled(tc.CancelTurn(ctx, env))
}

// CancelRequest tells an upstream that implements agent.RequestCanceller
// that env's request, redelivered, was cancelled before this worker called
// it: the worker that started it may have left its upstream work running
// (an A2A upstream cancels the task it recorded for the request); for any
// other upstream there is nothing to tell. The request ends cancelled
// whatever it returns; an error is the upstream's (an *Error, its message
// scrubbed), which the runtime logs.
func (h *Handler) CancelRequest(ctx context.Context, env *e2a.Envelope) error {
	rc, ok := h.up.(agent.RequestCanceller)
	if !ok {
		return nil
	}
	return h.cancelled(rc.CancelRequest(ctx, env))
}

// cancelled is the answer of a cancel the upstream was told of: counted
// (calls, outcome cancel_*), classified, its message scrubbed.
func (h *Handler) cancelled(err error) error {
	err = Classify(err)
	h.m.calls.WithLabelValues(h.pool, h.up.Name(), "cancel_"+outcome(err)).Inc()
	if be := (*Error)(nil); errors.As(err, &be) {
		return h.scrubbed(be)
	}
	return err
}

// Serve calls the upstream for env, bounded, retried and measured.
func (h *Handler) Serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	name := h.up.Name()
	select {
	case h.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-h.slots }()
	h.m.inFlight.WithLabelValues(h.pool, name).Inc()
	defer h.m.inFlight.WithLabelValues(h.pool, name).Dec()

	start := time.Now()
	// The call's own context, cancelled when its answer passes the bound
	// on its bytes: the upstream is read no further.
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	cw := &countingWriter{Writer: w, max: h.cfg.maxAnswer, cancel: cancel, h: h, name: name, start: start, scrub: h.scrub}
	var err error
	for attempt := 0; ; attempt++ {
		err = classify(ctx, h.up.Call(callCtx, env, cw))
		if cw.over != nil {
			// Whatever the upstream made of the refused write (or of its
			// call cancelled), the request ends with the bound's error.
			err = cw.over
			break
		}
		if err == nil || cw.n > 0 || attempt >= h.cfg.retries || ctx.Err() != nil {
			break
		}
		var be *Error
		if !errors.As(err, &be) || !be.Retryable || errors.Is(err, ErrSentUnanswered) {
			break
		}
		wait := h.backoff(attempt, be.RetryAfter)
		h.m.retries.WithLabelValues(h.pool, name).Inc()
		h.cfg.log.Info("upstream call failed before any frame; retrying", append(requestAttrs(env), "pool", h.pool, "upstream", name,
			"code", be.Code, "attempt", attempt+1, "wait", wait)...)
		if serr := h.cfg.sleep(ctx, wait); serr != nil {
			break
		}
	}
	h.m.duration.WithLabelValues(h.pool, name).Observe(time.Since(start).Seconds())
	oc := outcome(err)
	if err == nil && cw.failed {
		// The upstream answered, with its own failure: a dashboard of
		// the calls showed every such request ok.
		oc = "agent_failed"
	}
	if err != nil && ctx.Err() != nil && !errors.Is(context.Cause(ctx), agent.ErrFenced) {
		// The request's own end (cancelled, past its deadline) whatever
		// error the call returned then (a frame's write refused as the
		// request ended: seen in CI): not the upstream's failure. A
		// worker fenced out stays the runtime's error.
		oc = "cancelled"
	}
	h.m.calls.WithLabelValues(h.pool, name, oc).Inc()
	if err == nil {
		return nil
	}
	var be *Error // on the heap (errors.As): declared only for an error
	if errors.As(err, &be) {
		be = h.scrubbed(be)
		h.cfg.log.Warn("upstream call failed", append(requestAttrs(env), "pool", h.pool, "upstream", name,
			"code", be.Code, "retryable", be.Retryable, "frames_written", cw.n, "answer_bytes", cw.bytes, "err", be.Message)...)
		return be.AgentError()
	}
	return err
}

// requestAttrs are the log attributes that name env's request as the
// agent runtime's request log does: its id, and its correlation id and
// W3C traceparent when it has them (a valid one only), so that a bridge's
// log line of a request is found by any of them.
func requestAttrs(env *e2a.Envelope) []any {
	attrs := []any{"request_id", env.RequestID}
	if env.CorrelationID != "" {
		attrs = append(attrs, "correlation_id", env.CorrelationID)
	}
	if tc := e2a.CleanTrace(env.Trace); tc != nil && tc.Traceparent != "" {
		attrs = append(attrs, "traceparent", tc.Traceparent)
	}
	return attrs
}

// classify is Classify for a call made with ctx, the request's context:
// once ctx is done (the request's cancel, its deadline, a shutdown), a
// call that ended with a context's error (context.Canceled or
// DeadlineExceeded, however wrapped or classified, or ctx's cause) ended
// because the request did, not because of the upstream: it is ctx.Err(),
// counted as outcome cancelled and not logged as the upstream's failure.
// (Classify alone cannot tell the request's deadline from a deadline of
// the client's own, a dial or a call timeout: both are
// context.DeadlineExceeded.) A writer's refusal (fenced, closed) stays
// the runtime's error.
func classify(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && !isRuntimeError(err) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Cause(ctx)) {
			return ctx.Err()
		}
	}
	return Classify(err)
}

// scrubbed is be with the upstream's credentials taken out of its message
// (when the upstream is a Scrubber), the message then cut to
// MaxErrorMessage characters (Clip): a copy when either changed it.
func (h *Handler) scrubbed(be *Error) *Error {
	msg := be.Message
	s, ok := h.up.(Scrubber)
	if ok {
		msg = s.Scrub(msg)
	}
	msg = Clip(msg, MaxErrorMessage, nil)
	if !ok && msg == be.Message {
		return be
	}
	c := *be
	c.Message = msg
	return &c
}

// backoff is the wait before retry attempt+1: full jitter up to
// base·2^attempt (at most the cap), or the upstream's Retry-After when
// longer (at most the cap).
func (h *Handler) backoff(attempt int, after time.Duration) time.Duration {
	ceil := min(h.cfg.base<<min(attempt, 20), h.cfg.cap)
	d := time.Duration(rand.Int64N(int64(ceil) + 1))
	return min(max(d, after), h.cfg.cap)
}

// outcome is a call's outcome label: ok, the error code, or cancelled.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var be *Error // on the heap (errors.As): declared only for an error
	switch {
	case errors.As(err, &be):
		return be.Code
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	}
	return "error"
}

// countingWriter counts the frames written through it: a call that wrote
// any is never retried from the start.
type countingWriter struct {
	agent.Writer
	n int
	// h, name and start are the call's Handler, its upstream's name and
	// its start: the first frame written observes the time to it, the
	// first final one counts its tokens (fields, not closures: those were
	// allocations per request).
	h     *Handler
	name  string
	start time.Time
	// scrub, when set (a Scrubber upstream), takes the upstream's
	// credentials out of every frame it writes but the answer's streamed
	// content (scrubframes.go): an agent's failure message, an HTTP
	// agent's own e2a.error or acp.jsonrpc_error frame, an interrupt's
	// question, a status message, a final frame, the frames' metadata.
	scrub func(string) string
	// counted is set by the request's first final e2a.complete frame
	// (written by Complete or Write), whose result's tokens are counted:
	// once per request, even when the upstream writes its final frame
	// again (the OpenAI bridge, after a frame too large), and before the
	// frame is written, so that the client that sees it finds them
	// counted. A call retried wrote no frame, so counted nothing.
	counted bool
	// failed is set by a final e2a.error frame written (the upstream's
	// own failure: an HTTP agent's error frame, an A2A agent's failed
	// task): the call's outcome is agent_failed, not ok.
	failed bool
	// max bounds bytes, those of the frames written (their bodies as
	// stored, and the metadata each carries: meta, the encoded length of
	// the metadata set); over is the error of the write that would pass
	// it, returned by every write from then on, and cancel cancels the
	// upstream's call with it.
	max, bytes, meta int64
	over             *Error
	cancel           context.CancelCauseFunc
	// run is the kind of the text or reasoning deltas written last (""
	// after any other write), and runBytes their text since the one
	// counted as a frame of its own: deltas the runtime coalesces into
	// one frame are counted as it stores them (textCost).
	run      string
	runBytes int64
}

// textCost is what a text or reasoning delta s of kind adds to the
// stored answer: the runtime coalesces such deltas, written faster than
// its frames are stored, into frames of up to agent.DefaultCoalesceBytes
// of text, each with the delta's kind and the metadata once; so a delta
// that follows one of its kind within that much text adds its escaped
// text alone, any other the whole frame it starts (its kind, its quotes,
// the metadata). Each delta was counted as a frame, metadata and all:
// an answer of 16-byte deltas was refused at a quarter of the bound.
// (Deltas written slower than frames are stored are frames of their own:
// their metadata is counted once per agent.DefaultCoalesceBytes of text.)
func (c *countingWriter) textCost(kind, s string) int64 {
	n := jsonStringLen(s)
	if c.run == kind && c.runBytes+int64(len(s)) <= agent.DefaultCoalesceBytes {
		c.runBytes += int64(len(s))
		return n - 2
	}
	c.run, c.runBytes = kind, int64(len(s))
	return int64(len(kind)) + n + c.meta
}

// admit counts a write of cost bytes (metadata included) against the
// bound, or refuses it (and every later one) when it would pass it.
func (c *countingWriter) admit(cost int64) error {
	if c.over != nil {
		return c.over
	}
	n := c.bytes + cost
	if c.max > 0 && n > c.max {
		c.over = c.overError()
		if c.cancel != nil {
			c.cancel(c.over)
		}
		return c.over
	}
	c.bytes = n
	return nil
}

// overError is the error of a write that would pass the bound.
func (c *countingWriter) overError() *Error {
	return &Error{Code: CodeProtocol, Err: ErrAnswerTooLarge, Message: fmt.Sprintf(
		"upstream answer is larger than %d bytes (its frames as stored): stopped after %d writes of %d bytes",
		c.max, c.n, c.bytes)}
}

// finalOver is Complete's refusal of a final frame whose result would
// pass the bound (an answer whose text, already stored as deltas, is
// more than what is left of the bound): to the upstream it is
// agent.ErrFrameTooLarge, on which the A2A and OpenAI bridges write
// their final frame again without the text the deltas hold (text_omitted,
// content_omitted), as they do for one larger than the server's
// max_payload; that smaller one is admitted when it fits. It is the
// bound's *Error to whoever returns it (Classify): an upstream that writes
// no smaller final frame ends upstream_protocol_error as before. Unlike
// the other writes' refusals it does not end the answer.
type finalOver struct{ err *Error }

func (e *finalOver) Error() string   { return e.err.Error() }
func (e *finalOver) Unwrap() []error { return []error{e.err, agent.ErrFrameTooLarge} }

// Hold passes agent.Hold on to the runtime's writer.
func (c *countingWriter) Hold(on bool) { agent.Hold(c.Writer, on) }

// MaxFrameBytes passes agent.MaxFrameBytes on from the runtime's writer.
func (c *countingWriter) MaxFrameBytes() int64 { return agent.MaxFrameBytes(c.Writer) }

// AnswerBytesLeft is what is left of the bound on the answer's bytes
// (AnswerBytesLeft).
func (c *countingWriter) AnswerBytesLeft() int64 {
	if c.max <= 0 {
		return -1
	}
	return max(c.max-c.bytes, 0)
}

// AnswerBytesLeft is what is left of the bound on the bytes of the
// answer w writes (WithMaxAnswerBytes), when w is the writer a Handler
// gives its upstream's Call; -1 for any other writer (no bound known). An
// upstream that holds what it writes later (the OpenAI bridge's tool
// calls, each written whole) holds no more than that: more could never be
// written, and the bound, which counts what is written, does not count
// what is held.
func AnswerBytesLeft(w agent.Writer) int64 {
	if b, ok := w.(interface{ AnswerBytesLeft() int64 }); ok {
		return b.AnswerBytesLeft()
	}
	return -1
}

// completed counts the tokens the result of the request's first final
// frame reports.
func (c *countingWriter) completed(result any) {
	if c.counted || c.h == nil {
		return
	}
	c.counted = true
	c.h.m.countTokens(&c.h.models, c.h.pool, c.name, result, c.scrub)
}

// SetMetadata sets the metadata of the frames written after it, scrubbed
// (scrub) when the upstream filled it with its own words: an HTTP agent's
// frames carry their own metadata, which the final frame shows the client
// too. (Set once per model response or so: the cost is an encoding.)
func (c *countingWriter) SetMetadata(m map[string]any) error {
	// Metadata of strings only (the OpenAI bridge's completion id) is
	// encoded once, here, for the scrub and the count both.
	enc, plain := plainStringMap(m)
	if c.scrub != nil && len(m) > 0 {
		var scrubbed any
		if plain {
			if out, ok := scrubJSON(enc, c.scrub); ok {
				scrubbed = json.RawMessage(out)
			}
		} else {
			scrubbed = scrubBody(m, c.scrub)
		}
		if raw, ok := scrubbed.(json.RawMessage); ok {
			var out map[string]any
			d := json.NewDecoder(bytes.NewReader(raw))
			d.UseNumber() // numbers as they were written
			if err := d.Decode(&out); err == nil {
				m, plain = out, false
			}
		}
	}
	if err := c.Writer.SetMetadata(m); err != nil {
		return err
	}
	c.run = "" // text coalescing is written under its own metadata
	switch {
	case len(m) == 0:
		c.meta = 0
	case plain:
		c.meta = int64(len(enc))
	default:
		c.meta = jsonLen(m)
	}
	return nil
}

// plainStringMap is the JSON of m as encoding/json writes it (its keys
// sorted), when m holds only strings (keys and values) without an HTML
// character (<, >, &), which alone encode differently with HTML escaping
// (json.Marshal, jsonLen) and without (scrubBody): the same bytes for
// both. False for anything else, and for an empty m.
func plainStringMap(m map[string]any) ([]byte, bool) {
	if len(m) == 0 {
		return nil, false
	}
	var keyArr [8]string
	keys := keyArr[:0]
	n := 2
	for k, v := range m {
		s, ok := v.(string)
		if !ok || strings.ContainsAny(k, "<>&") || strings.ContainsAny(s, "<>&") {
			return nil, false
		}
		keys = append(keys, k)
		n += len(k) + len(s) + 6
	}
	slices.Sort(keys)
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonstr.Append(b, k)
		b = append(b, ':')
		b = jsonstr.Append(b, m[k].(string))
	}
	return append(b, '}'), true
}

func (c *countingWriter) wrote() {
	if c.n == 0 && c.h != nil {
		c.h.m.ttft.WithLabelValues(c.h.pool, c.name).Observe(time.Since(c.start).Seconds())
	}
	c.n++
}

func (c *countingWriter) Chunk(kind string, delta any) error {
	var n int64
	if s, ok := delta.(string); ok && (kind == e2a.DeltaText || kind == e2a.DeltaReasoning) {
		n = c.textCost(kind, s)
	} else {
		c.run = ""
		n = int64(len(kind)) + jsonLen(delta) + c.meta
	}
	if err := c.admit(n); err != nil {
		return err
	}
	c.wrote()
	return c.Writer.Chunk(kind, delta)
}

func (c *countingWriter) Complete(result any) error {
	c.run = ""
	n := jsonLen(result) + c.meta
	if c.over == nil && c.max > 0 && c.bytes+n > c.max {
		return &finalOver{c.overError()}
	}
	if err := c.admit(n); err != nil {
		return err
	}
	c.wrote()
	c.completed(result)
	if c.scrub != nil {
		// A result the upstream wrote whole (an HTTP agent's JSON answer);
		// a result a bridge built from the deltas is the answer's content
		// (scrubframes.go).
		switch result.(type) {
		case json.RawMessage, []byte, string:
			result = scrubBody(result, c.scrub)
		}
	}
	return c.Writer.Complete(result)
}

func (c *countingWriter) Fail(code, message string, retryable bool) error {
	c.run = ""
	if err := c.admit(int64(len(code)) + jsonLen(message) + c.meta); err != nil {
		return err
	}
	c.wrote()
	if c.scrub != nil {
		message = c.scrub(message)
	}
	err := c.Writer.Fail(code, message, retryable)
	c.failed = c.failed || err == nil
	return err
}

func (c *countingWriter) Write(kind, status string, body any, final bool) error {
	c.run = ""
	if err := c.admit(jsonLen(body) + c.meta); err != nil {
		return err
	}
	c.wrote()
	if kind == e2a.KindComplete && final {
		c.completed(completeResult(body))
	}
	if c.scrub != nil && scrubsFrame(kind, status, body, final) {
		body = scrubBody(body, c.scrub)
	}
	err := c.Writer.Write(kind, status, body, final)
	c.failed = c.failed || err == nil && final && kind == e2a.KindError
	return err
}

// JSONSizer is a frame's body that tells the length of its JSON (as
// json.Marshal writes it) without being encoded, or ok false when it
// cannot tell: the bridge counts every frame's body against its answer
// bound, and a bridge's final result (the OpenAI bridge's) was encoded
// for it, then again by the runtime.
type JSONSizer interface {
	JSONLen() (n int64, ok bool)
}

// jsonLen is about the length of v's JSON as the runtime stores it: a
// string's escaped length, a raw message's own, anything else's encoding
// counted (0 when it does not encode: the runtime refuses it).
func jsonLen(v any) int64 {
	switch b := v.(type) {
	case nil:
		return 4
	case json.RawMessage:
		return int64(len(b))
	case []byte:
		return int64((len(b)+2)/3*4 + 2) // base64
	case string:
		return jsonStringLen(b)
	case JSONSizer:
		if n, ok := b.JSONLen(); ok {
			return n
		}
	}
	var n byteCounter
	e := json.NewEncoder(&n)
	if err := e.Encode(v); err != nil {
		return 0
	}
	return int64(n) - 1 // the encoder's newline
}

// jsonStringLen is the length of s as a JSON string, quotes included,
// escaped as encoding/json escapes (HTML characters too); a byte beyond
// ASCII counts one.
func jsonStringLen(s string) int64 {
	n := int64(2)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
			n += 2
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			n += 6
		default:
			n++
		}
	}
	return n
}

// byteCounter is an io.Writer that counts what is written to it.
type byteCounter int64

func (n *byteCounter) Write(p []byte) (int, error) {
	*n += byteCounter(len(p))
	return len(p), nil
}
