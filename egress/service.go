package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/obs"
	"github.com/e2a-pipeline/pipeline/internal/option"
	"github.com/e2a-pipeline/pipeline/internal/tracing"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// Output format names, used as the "format" label of the metrics.
const (
	FormatE2ASSE        = "e2a_sse"
	FormatE2ANDJSON     = "e2a_ndjson"
	FormatE2AJSON       = "e2a_json"
	FormatA2ASSE        = "a2a_sse"
	FormatA2AJSON       = "a2a_json"
	FormatAgentVaultSSE = "agentvault_sse"
	FormatACP           = "acp"
	FormatA2ENDJSON     = "a2e_ndjson" // rendered by package protocols/a2e
	FormatA2AV1SSE      = "a2av1_sse"  // rendered by package protocols/a2av1
)

// Labels of answers egress reads but does not render (CountedAs): not in
// Formats, which are renderers'.
const (
	FormatA2AV1JSON = "a2av1_json" // A2A v1.0's blocking SendMessage, every binding (package protocols/a2av1)
	FormatA2AV1GRPC = "a2av1_grpc" // A2A v1.0's gRPC streams (package protocols/a2av1)
)

// Formats lists every output format, in a stable order.
var Formats = []string{FormatE2ASSE, FormatE2ANDJSON, FormatE2AJSON, FormatA2ASSE, FormatA2AJSON, FormatAgentVaultSSE, FormatACP, FormatA2ENDJSON, FormatA2AV1SSE}

// Service serves the frames of requests over HTTP in every output format.
// It holds no state of its own beyond a connection: any egress process can
// serve any request. It is safe for concurrent use.
type Service struct {
	nc  *nats.Conn
	mux *streams.DirectGetter
	cfg config
	m   *metrics
	log *slog.Logger
	// live sizes the live channel of the readers (WithReplayOptions'
	// WithLiveBuffer and WithLiveBytes) for subscriptions made by Prepare:
	// its liveCapacity.
	live replayConfig
	// timers are the wait timers its closed readers left for the next
	// ones (replayConfig.timers).
	timers sync.Pool
	// historyTurns holds a token per History lookup in progress
	// (WithHistoryLimits; nil without a History).
	historyTurns chan struct{}
	// userTurns bound each principal's History lookups
	// (WithHistoryLookupsPerPrincipal).
	userTurns principalTurns
	// gate is the front door's ReadGate (SetReadGate; nil: none).
	gate atomic.Pointer[ReadGate]
	// floors caches the agent pools' ack floors: a request answered but
	// whose frames aged out is told from one not answered yet (agedOut).
	floors ackFloors
	// unended remembers requests known not to have ended up to a stored
	// message (endOf).
	unended openRequests
	// readsWith is the first replay option of every read (replayOptions):
	// the service's direct getter and wait limits, one value made once.
	readsWith ReplayOption
}

type config struct {
	reg          prometheus.Registerer
	log          *slog.Logger
	heartbeat    time.Duration
	retry        time.Duration
	writeTimeout time.Duration
	waitLimits
	cancelWait  time.Duration
	replay      []ReplayOption
	authorize   func(*http.Request) (tenant.Principal, error)
	headHold    time.Duration // headHold; tests change it
	projections func(*e2a.Response) *e2a.Response
	// history answers the read API for requests the hot streams no
	// longer hold (WithHistory); historyLookups and historyTimeout bound
	// its lookups (WithHistoryLimits).
	history             History
	historyLookups      int
	historyPerPrincipal int
	historyTimeout      time.Duration
}

// WithProjections makes the E2A endpoints answer ?projections=true with
// each frame re-encoded with its L3 projections (spec §12.1) filled by
// fill (protocols.FillProjections: the frame as ACP and A2A see it).
// Without it such a stream gives the frames as stored. fill must return a
// copy: the frame it is given is not changed.
func WithProjections(fill func(*e2a.Response) *e2a.Response) Option {
	return option.Check(ErrInvalidOption, fill != nil, func(c *config) { c.projections = fill }, "nil projections")
}

// WithAuthorizer guards the endpoints Register mounts: f authenticates the
// reader before anything is read and returns its principal, or an error to
// answer 401 {"error":{"code":"unauthenticated",…}}. A request is then
// served only to a principal the ownership rule allows to read it
// (tenant.Principal.Allows with the envelope's user_id as owner): any other
// principal gets the same 404 as an unknown request, so ids cannot be
// probed. A principal already in the request's context (tenant.NewContext,
// put there by a front that authenticated the caller, e.g. the console) is
// used instead of calling f. Ingress's Auth.Tenant is the usual f. Without
// it the endpoints are open (auth scheme none).
func WithAuthorizer(f func(*http.Request) (tenant.Principal, error)) Option {
	return option.Check(ErrInvalidOption, f != nil, func(c *config) { c.authorize = f }, "nil authorizer")
}

// Option configures a Service. Options validate their arguments: New
// returns an error wrapping ErrInvalidOption for a bad one.
type Option func(*config) error

// WithRegisterer registers the egress metrics on reg (default: none; nil
// is refused).
func WithRegisterer(reg prometheus.Registerer) Option {
	return option.NotNil(ErrInvalidOption, "registerer", reg, func(c *config) { c.reg = reg })
}

// WithLogger sets the logger (default slog.Default(); nil is refused).
func WithLogger(l *slog.Logger) Option {
	return option.NotNil(ErrInvalidOption, "logger", l, func(c *config) { c.log = l })
}

// WithHeartbeatInterval sets the idle time after which streams write a
// keep-alive (default 15 s; d ≤ 0 is refused).
func WithHeartbeatInterval(d time.Duration) Option {
	return option.Check(ErrInvalidOption, d > 0, func(c *config) { c.heartbeat = d }, "heartbeat interval %v ≤ 0", d)
}

// WithSSERetry sets the retry: delay announced on E2A SSE streams
// (default 2 s; 0 announces none, a negative delay is refused).
func WithSSERetry(d time.Duration) Option {
	return option.Check(ErrInvalidOption, d >= 0, func(c *config) { c.retry = d }, "SSE retry %v < 0", d)
}

// WithWriteTimeout sets how long a write to a client may block before the
// client is disconnected as slow (default 10 s; the socket buffers are the
// bounded buffer; d ≤ 0 is refused).
func WithWriteTimeout(d time.Duration) Option {
	return option.Check(ErrInvalidOption, d > 0, func(c *config) { c.writeTimeout = d }, "write timeout %v ≤ 0", d)
}

// WithWaitLimits sets the wait for the first frame of an accepted request
// (default 5 min) and between frames (default 10 min); zero keeps a
// default, negative: no limit. Every duration has a meaning, so none is
// refused.
func WithWaitLimits(first, idle time.Duration) Option {
	return func(c *config) error { c.waitLimits.set(first, idle); return nil }
}

// WithCancelWait sets how long a cancel waits for the final frame before
// answering with the task as it is (default 10 s; d ≤ 0 is refused).
func WithCancelWait(d time.Duration) Option {
	return option.Check(ErrInvalidOption, d > 0, func(c *config) { c.cancelWait = d }, "cancel wait %v ≤ 0", d)
}

// WithReplayOptions passes options to every reader (stream names, batch
// size, live buffer, poll interval). They are checked once, by New.
func WithReplayOptions(opts ...ReplayOption) Option {
	return func(c *config) error {
		rc := defaultReplayConfig()
		if err := applyReplay(&rc, opts); err != nil {
			return err
		}
		c.replay = append(c.replay, opts...)
		return nil
	}
}

type metrics struct {
	open     *prometheus.GaugeVec
	ttff     *prometheus.HistogramVec
	frames   *prometheus.CounterVec
	slow     *prometheus.CounterVec
	outcomes *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	s := obs.NewMetricSet(reg, obs.Exclusive)
	m := &metrics{
		open: s.GaugeVec("e2a_egress_streams_open", "Responses being served, by output format.", "format"),
		ttff: s.HistogramVec("e2a_egress_time_to_first_frame_seconds", "Time from the start of a response to the first frame written.",
			[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}, "format"),
		frames: s.CounterVec("e2a_egress_frames_written_total", "Frames written to clients, by output format.", "format"),
		slow: s.CounterVec("e2a_egress_slow_client_disconnects_total",
			"Clients disconnected because they did not read within the write timeout.", "format"),
		outcomes: s.CounterVec("e2a_egress_streams_total",
			"Responses served, by output format and outcome (final, not_found, timeout, client_gone, slow_client, shutdown, error).",
			"format", "outcome"),
	}
	return m, s.Err()
}

// New returns a Service reading from nc. A nil nc is ErrInvalidOption.
func New(nc *nats.Conn, opts ...Option) (*Service, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: nil NATS connection", ErrInvalidOption)
	}
	cfg := config{
		heartbeat:    DefaultHeartbeat,
		retry:        2 * time.Second,
		writeTimeout: 10 * time.Second,
		waitLimits:   defaultWaitLimits,
		cancelWait:   10 * time.Second,
		headHold:     headHold,

		historyLookups:      DefaultHistoryLookups,
		historyPerPrincipal: DefaultHistoryLookupsPerPrincipal,
		historyTimeout:      DefaultHistoryTimeout,
	}
	if err := option.Apply(ErrInvalidOption, &cfg, opts); err != nil {
		return nil, err
	}
	if cfg.log == nil {
		cfg.log = slog.Default()
	}
	m, err := newMetrics(cfg.reg)
	if err != nil {
		return nil, err
	}
	mux, err := streams.NewDirectGetter(nc)
	if err != nil {
		return nil, err
	}
	rc := defaultReplayConfig()
	if err := applyReplay(&rc, cfg.replay); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		mux.Close()
		return nil, fmt.Errorf("egress: JetStream context: %w", err)
	}
	s := &Service{nc: nc, mux: mux, cfg: cfg, m: m, log: cfg.log, live: rc,
		floors: ackFloors{js: js, m: map[string]ackFloor{}}}
	s.readsWith = func(c *replayConfig) error {
		c.mux = mux
		c.timers = &s.timers
		c.waitLimits.set(cfg.maxWait, cfg.idleTimeout)
		return nil
	}
	if cfg.history != nil {
		s.historyTurns = make(chan struct{}, cfg.historyLookups)
		s.userTurns = principalTurns{per: cfg.historyPerPrincipal, users: map[string]*userTurns{}}
	}
	return s, nil
}

// Close releases the Service's subscription. Streams in progress end with
// their request contexts.
func (s *Service) Close() { s.mux.Close() }

// Register mounts the E2A read endpoints on mux:
//
//	GET /v1/requests/{id}/stream  SSE (default) or NDJSON (Accept: application/x-ndjson)
//	GET /v1/requests/{id}         aggregated JSON; 202 while running, ?wait=true waits
//
// With a History (WithHistory), a request the hot streams no longer hold
// is answered from it, as a finished request is from the hot streams.
// With a ReadGate (SetReadGate, which ingress.New installs), every call is
// charged to its principal's rate limit, a stream and a wait take one of
// its stream slots, and a 401 carries the gate's challenge.
func (s *Service) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/requests/{id}/stream", func(w http.ResponseWriter, r *http.Request) {
		k, ok := s.authorized(w, r)
		if !ok {
			return
		}
		format, ok := streamFormat(w, r)
		if !ok {
			return
		}
		if _, err := AnswerParams(r); err != nil {
			WriteError(w, err)
			return
		}
		id := r.PathValue("id")
		var opts []ReplayOption
		if k.env != nil {
			opts = append(opts, WithoutRequestCheck()) // the check found it
		}
		k.history = !k.asked
		if r.Method == http.MethodHead {
			// The head a GET would open with, and no stream: a HEAD
			// holds none of the reader's stream slots while the
			// request runs.
			s.streamHead(w, r, id, format, k, opts...)
			return
		}
		// A stream takes one of the reader's stream slots (ReadGate).
		release, ok := s.streamSlot(w, k.p)
		if !ok {
			return
		}
		defer release()
		if k.env != nil && tracing.Enabled() {
			r = r.WithContext(withRequestTrace(r.Context(), k.env))
		}
		s.serveE2AStream(w, r, id, format, k, opts...)
	})
	mux.HandleFunc("GET /v1/requests/{id}", func(w http.ResponseWriter, r *http.Request) {
		k, ok := s.authorized(w, r)
		if !ok {
			return
		}
		k.history = !k.asked
		wait, err := AnswerParams(r)
		if err != nil {
			WriteError(w, err)
			return
		}
		if wait {
			// A wait is a streamed answer too: one of the reader's
			// stream slots (ReadGate).
			release, ok := s.streamSlot(w, k.p)
			if !ok {
				return
			}
			defer release()
		}
		s.serveE2AJSON(w, r, r.PathValue("id"), wait, k)
	})
	// GET patterns take HEAD too: a 405's Allow names both (RFC 9110
	// §15.5.6: every method the resource supports).
	mux.HandleFunc("/v1/requests/{id}", MethodNotAllowed(http.MethodGet, http.MethodHead))
	mux.HandleFunc("/v1/requests/{id}/stream", MethodNotAllowed(http.MethodGet, http.MethodHead))
}

// PathSegment escapes a request id for a URL path: url.PathEscape, and the
// dot segments "." and ".." escaped too (a client or server would otherwise
// remove them from the path, and the link would lead elsewhere).
func PathSegment(id string) string {
	seg := url.PathEscape(id)
	if seg == "." || seg == ".." {
		seg = strings.ReplaceAll(seg, ".", "%2E")
	}
	return seg
}

// MethodNotAllowed answers 405 in the E2A error shape with an Allow header
// naming the methods the path takes.
func MethodNotAllowed(allow ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		o := render.NewOutput(w, 0)
		_ = o.WriteJSON(http.StatusMethodNotAllowed, APIError{Error: APIErrorBody{Code: "method_not_allowed",
			Message: r.Method + " is not allowed here; use " + strings.Join(allow, " or ")}})
	}
}

// WriteTimeout is how long one write of an answer may block before the
// client is cut off as too slow (WithWriteTimeout).
func (s *Service) WriteTimeout() time.Duration { return s.cfg.writeTimeout }

// ServeE2A answers with the frames of requestID in the E2A format the
// request negotiates: SSE for Accept: text/event-stream, NDJSON for Accept:
// application/x-ndjson (both resume from Last-Event-ID or ?from=), else
// the aggregated JSON, waiting for the final frame with ?wait=true (202
// with the frames so far otherwise). Ingress calls it right after the
// publish of a request was acknowledged; the request is not looked up.
func (s *Service) ServeE2A(w http.ResponseWriter, r *http.Request, requestID string) {
	switch NegotiateE2A(r) {
	case mtSSE:
		s.serveE2AStream(w, r, requestID, FormatE2ASSE, known{}, WithoutRequestCheck())
	case mtNDJSON:
		s.serveE2AStream(w, r, requestID, FormatE2ANDJSON, known{}, WithoutRequestCheck())
	default:
		s.serveE2AJSON(w, r, requestID, IsTrue(QueryValue(r, "wait")), known{})
	}
}

// streamFormat is the format of a request's stream the Accept headers
// of r allow: NDJSON when they rank it above SSE, else SSE, else NDJSON;
// when they allow neither it answers 406 itself.
func streamFormat(w http.ResponseWriter, r *http.Request) (string, bool) {
	// NDJSON is asked for by name, and wins when SSE's range ranks no
	// higher: a wildcard ranking SSE above a named NDJSON (q=0.5, */*)
	// lost to it when only named types were read.
	nd := acceptQ(r, mtNDJSON)
	sse, _ := rangeQ(r, mtSSE)
	switch {
	case nd > 0 && nd >= sse:
		return FormatE2ANDJSON, true
	case acceptable(r, mtSSE):
		return FormatE2ASSE, true
	case acceptable(r, mtNDJSON):
		return FormatE2ANDJSON, true
	}
	o := render.NewOutput(w, 0)
	_ = o.WriteJSON(http.StatusNotAcceptable, APIError{Error: APIErrorBody{Code: CodeNotAccept,
		Message: "a request's stream is " + mtSSE + " or " + mtNDJSON + "; the Accept header allows neither"}})
	return "", false
}

// streamHead answers a HEAD of a request's stream: the status and headers
// its GET (serveE2AStream, with opts) opens with, in format, decided as the
// GET decides them: the reader opened and closed (or the History asked),
// so that a request whose frames aged out is 410 and one read from the
// History past its final frame 204, not 200 from the envelope alone, and
// one whose envelope aged out while its frames are hot 200, not 404.
func (s *Service) streamHead(w http.ResponseWriter, r *http.Request, id, format string, k known, opts ...ReplayOption) {
	o, rend := s.e2aStreamOutput(w, format)
	from, ok := s.resumeFrom(w, r, o, rend, format, id, k)
	if !ok {
		return
	}
	ctx := r.Context()
	rd, h, err := s.openRead(ctx, id, from, k, append(s.replayOptions(nil), append(opts, WithoutDecode())...))
	if err != nil {
		WriteError(w, err)
		return
	}
	past := false
	if rd != nil {
		past = from > 0 && rd.endedBefore(ctx)
		rd.Close()
	} else {
		frames, ferr := h.frames(id)
		past = historicPast(frames, ferr, from)
	}
	if past {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if rend.Start() == nil {
		_ = o.Flush()
	}
}

// e2aStreamOutput is the output to w and the renderer of an E2A stream in
// format (FormatE2ANDJSON, else SSE).
func (s *Service) e2aStreamOutput(w http.ResponseWriter, format string) (*render.Output, render.Renderer) {
	o := render.NewOutput(w, s.cfg.writeTimeout)
	if format == FormatE2ANDJSON {
		return o, NewE2ANDJSON(o)
	}
	return o, NewE2ASSE(o, s.cfg.retry, "")
}

// known is what a handler knows of a request before it reads it: its
// envelope message in E2A_REQUESTS, or its copy in the History, when the
// ownership check read them, and whether the History may be asked when
// the hot streams hold nothing of it (the read API's endpoints), and the
// reader's principal (authorized; the open one when nothing authenticates).
type known struct {
	env     *nats.Msg
	hist    *HistoricRequest
	history bool
	// asked: the History was asked already and has no copy (seen).
	asked bool
	// taken: hist is the reader's request of an id another principal's
	// request holds in the hot streams (owned): the hot frames are that
	// request's, never followed after the copy's.
	taken bool
	p     tenant.Principal
	// e2aStream: an E2A stream, whose resume point past the final frame
	// is answered 204 No Content (resumeFrom).
	e2aStream bool
}

func (s *Service) serveE2AStream(w http.ResponseWriter, r *http.Request, id, format string, k known, opts ...ReplayOption) {
	o, rend := s.e2aStreamOutput(w, format)
	rend = maybeProjecting(r, rend, s.cfg.projections)
	from, ok := s.resumeFrom(w, r, o, rend, format, id, k)
	if !ok {
		return
	}
	o.SetEndsResponse()
	k.e2aStream = true
	s.stream(r.Context(), o, rend, format, id, from, k, opts...)
}

// resumeFrom is the resume point of a request's stream (ResumePoint), its
// GET and HEAD alike; ok is false when it answered instead: 400 for a
// malformed one, 204 for one past the final frame.
func (s *Service) resumeFrom(w http.ResponseWriter, r *http.Request, o *render.Output, rend render.Renderer, format, id string, k known) (from int64, ok bool) {
	from, err := ResumePoint(r)
	if err != nil {
		s.finish(o, rend, format, err)
		return 0, false
	}
	if from > 0 && k.hist == nil {
		// A resume past the final frame has nothing to send, ever: 204 No
		// Content is what makes a browser's EventSource stop reconnecting
		// (a 200 with an empty stream would make it retry forever).
		if last, err := s.lastFrame(r.Context(), id); err == nil && last != nil && last.final && from > last.seq {
			s.m.outcomes.WithLabelValues(format, "final").Inc()
			w.WriteHeader(http.StatusNoContent)
			return 0, false
		}
	}
	return from, true
}

// headHold is how long a stream's head (status line, headers, the
// renderer's opening event) waits for the request's first frame, to go out
// in the same write: normally well under a millisecond at half load, a few
// at full load. A later first frame finds the head sent already.
const headHold = 20 * time.Millisecond

// Stream drives rend with the frames of requestID from sequence from to
// the final frame: the generic loop every streaming endpoint uses. It
// returns when the final frame was written and flushed (left buffered for
// net/http to send with the end of the response when o ends the response,
// see endsResponse), the request context ended (client gone), the client
// was too slow, or the wait limits passed.
func (s *Service) Stream(ctx context.Context, o *render.Output, rend render.Renderer, format, requestID string, from int64, opts ...ReplayOption) {
	s.stream(ctx, o, rend, format, requestID, from, known{}, opts...)
}

// stream is Stream, with what the handler knows of the request (k): the
// frames of k.hist when the ownership check found the request in the
// History, else the hot streams' and, with k.history, the History's when
// the hot streams hold nothing of it (the reader finds it unknown).
func (s *Service) stream(ctx context.Context, o *render.Output, rend render.Renderer, format, requestID string, from int64, k known, opts ...ReplayOption) {
	start := time.Now()
	var (
		span    trace.Span
		nFrames int
		endErr  error
	)
	if tracing.Enabled() {
		ctx, span = s.startStreamSpan(ctx, format, requestID, from)
		defer func() { endStreamSpan(span, nFrames, endErr) }()
	}
	finish := func(err error) {
		endErr = err
		s.endStream(ctx, o, rend, format, err)
	}
	g := s.m.open.WithLabelValues(format)
	g.Inc()
	defer g.Dec()
	ropts := s.replayOptions(func() error {
		if err := rend.Heartbeat(); err != nil {
			return err
		}
		return o.Flush()
	})
	if pt, ok := rend.(render.PassThrough); ok && pt.PassThrough() {
		ropts = append(ropts, WithoutDecode())
	}
	// The read of the hot streams that follows a History's copy without a
	// final frame (followHot) starts after the frames the copy gave: none
	// of them to prime again.
	hotOpts := append(slices.Clip(ropts), withWaitHooks(o, s.cfg.headHold))
	hotOpts = append(hotOpts, opts...)
	if p, ok := rend.(render.Primer); ok && from > 0 {
		// The frames before the resume point, which the client has, as the
		// reader meets them on its way there.
		ropts = append(ropts, withBefore(p.Prime))
	}
	// What is written goes out when the reader has nothing more to give
	// at once: frames that arrived together in one write. The head waits
	// for the first frame (headHold at most), so that a request's first
	// frame and a finished request's whole replay go out with it.
	o.HoldHead(true)
	ropts = append(ropts, withWaitHooks(o, s.cfg.headHold))
	rd, h, err := s.openRead(ctx, requestID, from, k, append(ropts, opts...))
	if err != nil {
		finish(err)
		return
	}
	if h != nil {
		var rest int64
		nFrames, rest, err = s.driveHistoric(o, rend, format, requestID, from, h, start)
		switch {
		case err == nil && rest >= 0 && k.taken:
			err = noFinalFrame(requestID) // the hot frames are another request's
		case err == nil && rest >= 0:
			var n int
			n, err = s.followHot(ctx, o, rend, format, requestID, rest, nFrames, hotOpts, start)
			nFrames += n
		}
		finish(err)
		return
	}
	defer rd.Close()
	if k.e2aStream && from > 0 && rd.endedBefore(ctx) {
		// The final frame lies before the resume point, though the last
		// stored frame is not final (resumeFrom): one stored after it by
		// hand. 204, as for any resume past the final frame: an empty
		// 200 would have a browser's EventSource reconnect forever.
		o.WriteHeader(http.StatusNoContent)
		finish(nil)
		return
	}
	if err := rend.Start(); err != nil {
		finish(err)
		return
	}
	nFrames, err = s.drive(ctx, o, rend, rd, format, 0, start)
	finish(err)
}

// followHot goes on with a request whose History's copy ended without a
// final frame, after written frames, at sequence next: a request still
// running whose envelope left E2A_REQUESTS before its frames left
// E2A_RESPONSES (stored first, it is dropped first). Its frames from next
// on are read from the hot streams as any stream reads them, those not
// written yet waited for; when the hot streams hold none of its frames,
// none will come (noFinalFrame), and when their final frame lies before
// next, the stream ends there.
func (s *Service) followHot(ctx context.Context, o *render.Output, rend render.Renderer, format, id string, next int64, written int, opts []ReplayOption, start time.Time) (int, error) {
	last, err := s.lastFrame(ctx, id)
	switch {
	case err != nil:
		return 0, err
	case last == nil:
		return 0, noFinalFrame(id)
	case last.final && last.seq < next:
		return 0, nil
	}
	rd, err := s.open(ctx, id, next, append(opts, WithoutRequestCheck())...)
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	return s.drive(ctx, o, rend, rd, format, written, start)
}

// openRead starts the read of requestID from sequence from as a stream
// does (its GET and HEAD alike): a reader of the hot streams (opts), or
// the History's copy (k.hist, found by the ownership check; or
// historyInstead, when the hot streams hold nothing of it or not the
// frames the read needs).
func (s *Service) openRead(ctx context.Context, requestID string, from int64, k known, opts []ReplayOption) (*Reader, *HistoricRequest, error) {
	if k.hist != nil {
		return nil, k.hist, nil
	}
	rd, err := s.open(ctx, requestID, from, append(opts, withAgedOut(s.agedOut, k.env))...)
	if err == nil {
		return rd, nil, nil
	}
	h, err := s.historyInstead(ctx, requestID, k, err)
	return nil, h, err
}

// drive renders rd's frames through rend until the final one (nil) or an
// error, and returns how many it rendered; the stream's first (none
// written before, written 0) is its time to first frame since start.
func (s *Service) drive(ctx context.Context, o *render.Output, rend render.Renderer, rd *Reader, format string, written int, start time.Time) (int, error) {
	frames := s.m.frames.WithLabelValues(format)
	n := 0
	// One Frame for the whole stream: rend.Frame takes its address, which
	// would move a per-iteration variable to the heap for every frame.
	// Renderers do not keep the pointer.
	var f render.Frame
	for {
		var err error
		f, err = rd.Next(ctx)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if err := rend.Frame(&f); err != nil {
			return n, err
		}
		frames.Inc()
		n++
		o.HoldHead(false)
		if n == 1 && written == 0 {
			s.m.ttff.WithLabelValues(format).Observe(time.Since(start).Seconds())
		}
	}
}

// historyInstead is the History's copy of request id for a read of the
// hot streams that ended with err: ErrNotFound (nothing of it is hot) or
// ErrFramesExpired (its envelope is, not the frames the read needs), when
// k lets the History be asked (fromHistory) and it has a copy. Otherwise
// it returns err; a request whose frames aged out stays ErrFramesExpired
// when the History has none (it existed: a final 410, not a 404).
func (s *Service) historyInstead(ctx context.Context, id string, k known, err error) (*HistoricRequest, error) {
	if !k.history || !(errors.Is(err, ErrNotFound) || errors.Is(err, ErrFramesExpired)) {
		return nil, err
	}
	user := "" // bounded by the Service's limit alone (fromHistory)
	if !k.p.SeesAll() {
		user = k.p.ID // whose ownership the envelope gave: its own turns
	}
	h, herr := s.fromHistory(ctx, id, user)
	if herr == nil && !k.p.Allows(tenant.Read, ownerOfData(h.Envelope)) {
		// The id taken again once its first request left the hot
		// streams: the History's copy is that request, another
		// principal's (the first in the id's window), not the one whose
		// envelope the ownership check read. It has none of k.p's.
		h, herr = nil, fmt.Errorf("%w: %q (history)", ErrNotFound, id)
	}
	if herr != nil && errors.Is(err, ErrFramesExpired) && errors.Is(herr, ErrNotFound) {
		return nil, err
	}
	return h, herr
}

// endStream ends a stream as finish does, but for a renderer whose answer
// is one response (render.Interruptible, a blocking send) cut by the
// server's shutdown: its answer as it stands, which names the task the
// client reads again, not nothing.
func (s *Service) endStream(ctx context.Context, o *render.Output, rend render.Renderer, format string, err error) {
	if ir, ok := rend.(render.Interruptible); ok && o.Err() == nil && ShuttingDown(ctx, err) {
		s.m.outcomes.WithLabelValues(format, "shutdown").Inc()
		_ = ir.Interrupted()
		_ = o.Flush()
		return
	}
	s.finish(o, rend, format, err)
}

// primeFrames gives a resumed stream's renderer, when it is a
// render.Primer, the frames of a request read from the History before
// from (the client has them); a stream read from the hot streams gets them
// from its reader (withBefore).
func primeFrames(rend render.Renderer, frames []render.Frame, from int64) error {
	p, ok := rend.(render.Primer)
	if !ok {
		return nil
	}
	for i := range frames {
		if frames[i].Sequence() >= from {
			break
		}
		if err := p.Prime(&frames[i]); err != nil {
			return err
		}
	}
	return nil
}

// finish ends a response: End on the renderer unless the client is gone,
// a flush, the outcome metric and a log line for unusual endings.
func (s *Service) finish(o *render.Output, rend render.Renderer, format string, err error) {
	outcome := "final"
	switch {
	case err == nil:
	case o.SlowClient():
		outcome = "slow_client"
		s.m.slow.WithLabelValues(format).Inc()
		s.log.Warn("egress: slow client disconnected", "format", format, "reason", "write blocked longer than the write timeout", "timeout", s.cfg.writeTimeout)
	case o.Err() != nil || errors.Is(err, context.Canceled):
		outcome = "client_gone"
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrFramesExpired):
		// A request whose frames aged out is not found in the hot
		// streams either: the client's answer (410), nothing for an
		// operator to act on per read.
		outcome = "not_found"
	case errors.Is(err, ErrWaitTimeout):
		outcome = "timeout"
	default:
		outcome = "error"
	}
	s.m.outcomes.WithLabelValues(format, outcome).Inc()
	if outcome == "slow_client" || outcome == "client_gone" {
		return
	}
	switch {
	case outcome == "error" && errors.Is(err, ErrBadRequest):
		// The client's mistake (a malformed Last-Event-ID or from),
		// answered 400: nothing for an operator to act on.
		s.log.Debug("egress: bad request", "format", format, "err", err)
	case outcome == "error" && errors.Is(err, ErrShuttingDown):
		s.log.Debug("egress: wait ended by the shutdown", "format", format)
	case outcome == "error" && errors.Is(err, ErrHistoryUnavailable):
		// Logged once already, by the lookup (historyFailed).
		s.log.Debug("egress: history unavailable", "format", format, "err", err)
	case outcome == "error":
		s.log.Error("egress: stream ended with an error", "format", format, "err", err)
	}
	_ = rend.End(err)
	if err == nil && o.EndsResponse() {
		// net/http sends what is buffered with the end of the response
		// (the last chunk) when the handler returns: one write.
		return
	}
	_ = o.Flush()
}

// shutdownErr is err, the end of a wait for request id, as the client is
// answered it: ErrShuttingDown, naming the request, when the server's
// shutdown ended ctx (its cause), else err.
func shutdownErr(ctx context.Context, id string, err error) error {
	if ShuttingDown(ctx, err) {
		return fmt.Errorf("%w: request %q was accepted; read it again with GET /v1/requests/%s", ErrShuttingDown, id, PathSegment(id))
	}
	return err
}

// ShuttingDown reports whether err, the end of a wait under ctx, is the
// server's shutdown ([ErrShuttingDown], the cause of ctx's end), not the
// client gone: a client waiting for one answer is then answered with what
// there is, naming the request or task to read again.
func ShuttingDown(ctx context.Context, err error) bool {
	return errors.Is(err, context.Canceled) && errors.Is(context.Cause(ctx), ErrShuttingDown)
}

// Heartbeat is the interval of keep-alives on idle streams.
func (s *Service) Heartbeat() time.Duration { return s.cfg.heartbeat }

func (s *Service) replayOptions(beat func() error) []ReplayOption {
	// Room for the options a read adds (stream's, openRead's, open's: six
	// at most), so that they are not copied from one array to the next.
	opts := make([]ReplayOption, 1, 8+len(s.cfg.replay))
	opts[0] = s.readsWith
	if beat != nil {
		// WithHeartbeat without its check (the service's interval was
		// checked by New, beat is set) and the allocations of the check.
		opts = append(opts, func(c *replayConfig) error { c.heartbeat, c.onHeartbeat = s.cfg.heartbeat, beat; return nil })
	}
	return append(opts, s.cfg.replay...)
}

// serveE2AJSON answers the aggregated JSON of a request. With wait it
// first waits (without buffering) for the final frame. k.env is its stored
// envelope message when the caller already read it (nil: looked up here),
// k.hist its copy in the History when the caller found it there; with
// k.history, a request the hot streams hold nothing of is looked up in the
// History.
func (s *Service) serveE2AJSON(w http.ResponseWriter, r *http.Request, id string, wait bool, k known) {
	ctx := r.Context()
	env := k.env
	if tracing.Enabled() {
		var span trace.Span
		ctx, span = s.startStreamSpan(withRequestTrace(ctx, env), FormatE2AJSON, id, 0)
		defer span.End()
	}
	o := render.NewOutput(w, s.cfg.writeTimeout)
	// Every end the server's shutdown causes is answered 503 naming the
	// request (shutdownErr), not taken for the client gone: the shutdown
	// may come while the request is looked up, not only in the wait.
	finish := func(rend render.Renderer, err error) {
		s.finish(o, rend, FormatE2AJSON, shutdownErr(ctx, id, err))
	}
	g := s.m.open.WithLabelValues(FormatE2AJSON)
	g.Inc()
	defer g.Dec()
	from, err := ResumePoint(r)
	if err != nil {
		finish(NewE2AJSON(o, id, nil, false, 0), err)
		return
	}
	histEnv, historic := s.historicJSON(ctx, id, k)
	if historic {
		s.serveHistoricJSON(r, o, id, from, wait, k.hist)
		return
	}
	if env == nil && histEnv == nil {
		if env, err = s.findRequest(ctx, id); err != nil {
			finish(NewE2AJSON(o, id, nil, false, from), err)
			return
		}
	}
	// The last stored frame tells the status before any frame is written,
	// and bounds the snapshot. With ?wait=true it is the final frame the
	// wait read (a direct get now could reach a replica that lags it and
	// answer an older frame: "running" after the wait).
	var last *lastInfo
	lastRead := false
	if env == nil && histEnv == nil && k.history && s.historyFor(id) {
		// No envelope: when there is no frame either, the hot streams
		// hold nothing of the request, and the History may.
		if last, err = s.lastFrame(ctx, id); err != nil {
			finish(NewE2AJSON(o, id, nil, false, from), err)
			return
		}
		if last == nil {
			h, err := s.fromHistory(ctx, id, "")
			if err != nil {
				finish(NewE2AJSON(o, id, nil, false, from), err)
				return
			}
			s.serveHistoricJSON(r, o, id, from, wait, h)
			return
		}
		lastRead = true
	}
	envRaw := histEnv
	if env != nil {
		envRaw = env.Data
	}
	if wait || !lastRead {
		last, err = s.lastOrFinal(ctx, id, env, wait)
	}
	// The snapshot's reader is opened before the answer starts: a request
	// whose first frames aged out is answered from the History, or 410,
	// not 200 with an error after the envelope.
	var rd *Reader
	if err == nil {
		rd, last, err = s.openSnapshot(ctx, id, from, last)
	}
	if err == nil && env == nil && last == nil {
		err = ErrNotFound
	}
	if err != nil {
		if errors.Is(err, ErrFramesExpired) {
			h, herr := s.historyInstead(ctx, id, k, err)
			if herr == nil {
				s.serveHistoricJSON(r, o, id, from, wait, h)
				return
			}
			err = herr
		}
		finish(NewE2AJSON(o, id, envRaw, false, from), err)
		return
	}
	if rd != nil {
		defer rd.Close()
	}
	rend, past := s.startE2AJSON(r, o, id, envRaw, from, last)
	if rend == nil {
		return
	}
	var werr error
	if rd != nil && !past {
		werr = s.writeSnapshot(ctx, rd, rend, last)
	}
	finish(rend, werr)
}

// historicJSON is how the aggregated JSON answers request id when the
// ownership check found its copy in the History (k.hist; nil: it did not,
// and neither is returned): from the copy (historic), or, when the copy
// holds no final frame and the hot streams hold frames of it (a request
// still running when its envelope left E2A_REQUESTS, stored before its
// frames; not k.taken: those are another request's), from the hot streams
// as any request is, with the copy's envelope (env), its wait for the
// final frame included.
func (s *Service) historicJSON(ctx context.Context, id string, k known) (env []byte, historic bool) {
	h := k.hist
	if h == nil {
		return nil, false
	}
	frames, err := h.frames(id)
	if err != nil || k.taken || len(frames) > 0 && frames[len(frames)-1].IsFinal() {
		return nil, true
	}
	if last, err := s.lastFrame(ctx, id); err != nil || last == nil {
		return nil, true
	}
	return h.Envelope, false
}

// lastOrFinal is the last frame stored of request id (env: its envelope
// message; nil when E2A_REQUESTS does not hold it), or with wait its final
// frame, once stored. A request of which no frame is stored but that was
// answered (agedOut) is ErrFramesExpired, not a pending one.
func (s *Service) lastOrFinal(ctx context.Context, id string, env *nats.Msg, wait bool) (*lastInfo, error) {
	if wait {
		return s.waitFinal(ctx, id, env)
	}
	last, err := s.lastFrame(ctx, id)
	if err != nil || last != nil || env == nil {
		return last, err
	}
	if gone, err := s.agedOut(ctx, id, env); err == nil && gone {
		return nil, framesExpired(id, "it was answered, and no frame of it is stored any more")
	}
	return nil, nil
}

// openSnapshot opens the reader of the aggregated JSON of request id from
// the resume point from, whose last stored frame is last (nil: none), and
// returns where the snapshot ends: last, or the final frame stored before
// it (finalOf). rd is nil when the resume point is past that end.
func (s *Service) openSnapshot(ctx context.Context, id string, from int64, last *lastInfo) (rd *Reader, end *lastInfo, err error) {
	if last != nil && from <= last.seq {
		rd, err = Open(ctx, s.nc, id, from, append(s.replayOptions(nil), WithoutRequestCheck(), WithoutDecode())...)
		if err != nil {
			return nil, nil, err
		}
	}
	if end, err = s.finalOf(ctx, id, last, rd); err != nil {
		if rd != nil {
			rd.Close()
		}
		return nil, nil, err
	}
	if rd != nil && from > end.seq {
		rd.Close()
		return nil, end, nil
	}
	return rd, end, nil
}

// finalOf is last, the last frame stored of request id, or, when that is
// not final, the final frame stored before it: a request whose final frame
// is stored has ended, and frames stored after it (by hand, by a rogue or
// late writer) are ignored, as every reader ignores them. rd, when not nil,
// is the snapshot's reader, which has read the first frames already (all
// of a request of up to one batch): what it read tells, and a request it
// read to last without a final frame is remembered as open (s.unended), so
// that the next poll past last reads nothing more. Otherwise (a resume
// point past the last frame: a poller's usual view of a running request,
// or past the reader's first batch) endOf tells, reading the frames
// before last only when the last message's fence and the cache do not.
func (s *Service) finalOf(ctx context.Context, id string, last *lastInfo, rd *Reader) (*lastInfo, error) {
	if last == nil || last.final {
		return last, nil
	}
	if rd != nil {
		f, final, known := rd.finalUpTo(last.streamSeq)
		switch {
		case known && final:
			return &lastInfo{streamSeq: f.StreamSeq, seq: f.Sequence(), final: true, raw: f.Raw}, nil
		case known:
			s.unended.put(id, last.streamSeq)
			return last, nil
		}
	}
	return s.endOf(ctx, id, last)
}

// startE2AJSON starts the aggregated JSON answer of request id (its
// stored envelope env) whose last stored frame is last (nil: none, a
// pending request), from the hot streams or from the History: 200 when
// last is final, 202 otherwise. With a resume point past last (past), no
// frame is to be written and the state is last's (running, or the final
// frame's). It returns nil once it answered an error (finish).
func (s *Service) startE2AJSON(r *http.Request, o *render.Output, id string, env []byte, from int64, last *lastInfo) (rend render.Renderer, past bool) {
	final := last != nil && last.final
	past = last != nil && from > last.seq
	state := ""
	if past {
		var err error
		if state, err = last.state(id); err != nil {
			s.finish(o, NewE2AJSON(o, id, env, false, from), FormatE2AJSON, err)
			return nil, false
		}
	}
	next := from
	if past && final {
		// Nothing follows the final frame: the sequence to ask for next
		// is the one after it, whatever the resume point past it.
		next = last.seq + 1
	}
	rend = maybeProjecting(r, newE2AJSON(o, id, env, final, next, state), s.cfg.projections)
	if err := rend.Start(); err != nil {
		s.finish(o, rend, FormatE2AJSON, err)
		return nil, false
	}
	return rend, past
}

// writeSnapshot writes with rend the stored frames of a request that rd
// reads, from its resume point up to last, the last (with ?wait=true the
// final) frame read before the answer began.
func (s *Service) writeSnapshot(ctx context.Context, rd *Reader, rend render.Renderer, last *lastInfo) error {
	for {
		var (
			f   render.Frame
			err error
		)
		ok := true
		if last.final {
			// Up to the final frame, which exists: Next waits out a
			// replica that lags rather than ending short.
			if f, err = rd.Next(ctx); err == io.EOF {
				return nil
			}
		} else {
			f, ok, err = rd.NextStored(ctx)
		}
		if err != nil {
			return err
		}
		if !ok || f.StreamSeq > last.streamSeq {
			return nil
		}
		if err := rend.Frame(&f); err != nil {
			return err
		}
		s.m.frames.WithLabelValues(FormatE2AJSON).Inc()
		if f.StreamSeq == last.streamSeq && f.Sequence() >= last.seq {
			return nil // the last frame of the snapshot's last message
		}
	}
}

// waitFinal reads the request to its final frame without keeping frames,
// and returns where the final frame is. env is its envelope message when
// the caller read it (nil: the reader looks it up); a request answered
// whose frames aged out is ErrFramesExpired, not waited for.
func (s *Service) waitFinal(ctx context.Context, id string, env *nats.Msg) (*lastInfo, error) {
	opts := append(s.replayOptions(nil), WithoutDecode(), withAgedOut(s.agedOut, env))
	if env != nil {
		opts = append(opts, WithoutRequestCheck())
	}
	rd, err := Open(ctx, s.nc, id, 0, opts...)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var last *lastInfo
	for {
		f, err := rd.Next(ctx)
		if err == io.EOF {
			if last == nil {
				return nil, fmt.Errorf("%w: %q ended without a final frame", ErrInvalidFrame, id)
			}
			return last, nil
		}
		if err != nil {
			return nil, err
		}
		if f.IsFinal() {
			last = &lastInfo{streamSeq: f.StreamSeq, seq: f.Sequence(), final: true, raw: f.Raw}
		}
	}
}

// lastInfo is where the last (or the final) frame of a request is: the
// stream sequence of its message, its own sequence (a burst holds several
// frames under one stream sequence), whether it is final, and the frame.
type lastInfo struct {
	streamSeq uint64
	seq       int64
	final     bool
	raw       []byte
	// prev is the stream sequence of the message stored before it under
	// the request's subject (0: none), as its fence tells (fenced: the
	// message has one; predecessor).
	prev   uint64
	fenced bool
	// stamp is its message's store time (Nats-Time-Stamp).
	stamp string
}

// state is the state of the request whose last frame li is: running, or,
// for a final frame, the state its status gives (the frame decoded).
func (li *lastInfo) state(id string) (string, error) {
	if !li.final {
		return StateRunning, nil
	}
	resp, err := e2a.UnmarshalResponse(li.raw)
	if err != nil {
		return "", fmt.Errorf("%w: request %q sequence %d: %v", ErrInvalidFrame, id, li.seq, err)
	}
	return finalState(resp), nil
}

// lastFrame reads the last stored frame of a request (nil when none): the
// last frame of its last stored message, which may be a burst.
func (s *Service) lastFrame(ctx context.Context, id string) (*lastInfo, error) {
	subj, err := responseSubject(id)
	if err != nil {
		return nil, nil
	}
	msg, err := s.mux.GetLast(ctx, s.streamNames().responses, subj)
	if err != nil || msg == nil {
		return nil, err
	}
	li := &lastInfo{streamSeq: headerUint(msg, subjects.HeaderStreamSequence)}
	data, n, err := e2a.LastInBurst(msg.Header.Get(subjects.HeaderFrames), msg.Data)
	if err != nil {
		return nil, fmt.Errorf("%w: request %q stream sequence %d: %w", ErrInvalidFrame, id, li.streamSeq, err)
	}
	var head render.Head
	if err := head.Decode(data); err != nil {
		// No frame (bytes published on the subject by hand): as the
		// reader reads it, not the server's failure.
		return nil, fmt.Errorf("%w: request %q stream sequence %d: %v", ErrInvalidFrame, id, li.streamSeq, err)
	}
	if err := lastPlace(id, msg.Header, li.streamSeq, head.Sequence, n); err != nil {
		return nil, err
	}
	li.seq, li.final, li.raw = head.Sequence, head.IsFinal, data
	li.prev, li.fenced = predecessor(msg.Header)
	li.stamp = msg.Header.Get(subjects.HeaderTimeStamp)
	return li, nil
}

// lastPlace checks the sequence seq of the last frame of a stored message
// of n frames (hdr its headers, stored at streamSeq) as a reader checks it
// (checkPlace, sequenceMismatch): a message that is no frame, or whose
// E2A-Sequence header names another place, is invalid_frame here too, not
// a request running or ended at some sequence.
func lastPlace(id string, hdr nats.Header, streamSeq uint64, seq int64, n int) error {
	first, ok := headerInt(hdr, subjects.HeaderSequence)
	if !ok {
		if seq == render.NoSequence {
			return fmt.Errorf("%w: request %q stream sequence %d: no sequence", ErrInvalidFrame, id, streamSeq)
		}
		// The first frame's own sequence, as far as the last one tells.
		first = max(seq, -1) - int64(n-1)
	}
	if err := checkPlace(id, streamSeq, first); err != nil {
		return err
	}
	return sequenceMismatch(id, first+int64(n-1), seq)
}

type streamNames struct{ responses, requests string }

func (s *Service) streamNames() streamNames {
	c := defaultReplayConfig()
	for _, o := range s.cfg.replay {
		o(&c)
	}
	return streamNames{c.responses, c.requests}
}

// ResumePoint returns the first sequence a client asks for: the sequence
// after Last-Event-ID (an SSE reconnection), else ?from=, else 0, never
// negative (a Last-Event-ID of math.MaxInt64, after which no sequence
// exists, gives math.MaxInt64: past any final frame). It returns an error
// wrapping ErrBadRequest for a malformed value.
func ResumePoint(r *http.Request) (int64, error) {
	// The canonical form of Last-Event-ID: Get canonicalizes any other
	// into a new string, one allocation per read.
	if v := strings.TrimSpace(r.Header.Get("Last-Event-Id")); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -1 {
			return 0, badRequest("Last-Event-ID must be a frame sequence (an integer, -1 or more), not %q", v)
		}
		if n == math.MaxInt64 {
			// No frame follows the largest sequence: a resume point past
			// any final frame (n+1 would wrap around to a negative one).
			return n, nil
		}
		return n + 1, nil
	}
	if v := QueryValue(r, "from"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, badRequest("from must be a frame sequence (an integer, 0 or more), not %q", v)
		}
		return n, nil
	}
	return 0, nil
}

// WithoutResumePoint is r without its resume point (Last-Event-ID and
// ?from=, which ResumePoint reads): a copy when it has one, r itself
// otherwise (no copy on the common path).
func WithoutResumePoint(r *http.Request) *http.Request {
	if r == nil || r.Header.Get("Last-Event-Id") == "" && QueryValue(r, "from") == "" {
		return r
	}
	r = r.Clone(r.Context())
	r.Header.Del("Last-Event-ID")
	if q := r.URL.Query(); q.Has("from") {
		q.Del("from")
		r.URL.RawQuery = q.Encode()
	}
	return r
}

// QueryValue is the first value of r's query parameter key, "" when there
// is none: r.URL.Query().Get(key) (FuzzQueryValue compares them), read
// from the raw query without building its map (a request's parameters are
// read several times: url.ParseQuery's map and strings each time).
func QueryValue(r *http.Request, key string) string {
	q := r.URL.RawQuery
	for q != "" {
		var pair string
		pair, q, _ = strings.Cut(q, "&")
		if strings.Contains(pair, ";") {
			continue // url.ParseQuery refuses it, and goes on
		}
		k, v, _ := strings.Cut(pair, "=")
		if escaped := strings.ContainsAny(k, "%+"); k != key && !escaped {
			continue
		} else if escaped {
			if uk, err := url.QueryUnescape(k); err != nil || uk != key {
				continue
			}
		}
		if uv, err := url.QueryUnescape(v); err == nil {
			return uv
		}
	}
	return ""
}

// BoolParam is r's query parameter key read as strconv.ParseBool reads it
// (false when absent or empty), or an error wrapping ErrBadRequest for a
// value that is no boolean: ?wait=yes was read as false, and a client that
// asked to wait got 202 at once.
func BoolParam(r *http.Request, key string) (bool, error) {
	v := QueryValue(r, key)
	if v == "" || IsTrue(v) {
		return v != "", nil
	}
	if _, err := strconv.ParseBool(v); err == nil {
		return false, nil
	}
	return false, badRequest("%s must be true or false (1 or 0), not %q", key, v)
}

// AnswerParams reads the boolean parameters of an E2A answer of a
// request's frames: ?wait= (wait) and ?projections= (checked: the
// renderer reads it), or an error wrapping ErrBadRequest for either that
// is no boolean.
func AnswerParams(r *http.Request) (wait bool, err error) {
	if _, err := BoolParam(r, "projections"); err != nil {
		return false, err
	}
	return BoolParam(r, "wait")
}

// RepeatedParam is the name of a parameter q gives twice with different
// values ("" when none: ?from=1&from=1 is one value): the endpoints read
// the first, so the rest of what the client said was dropped without a
// word. Every door of ingress and the console refuse such a query.
func RepeatedParam(q url.Values) string {
	for name, vs := range q {
		for _, v := range vs[1:] {
			if v != vs[0] {
				return name
			}
		}
	}
	return ""
}

// IsTrue reports whether v is true as strconv.ParseBool reads it ("1",
// "t", "T", "TRUE", "true", "True"), without its error for a v that is
// not a boolean (an allocation per request for an absent parameter). The
// E2A front door reads ?wait= on a POST with it too, as GET does (it read
// only "true", so ?wait=1 got 202 at once where GET waited).
func IsTrue(v string) bool {
	switch v {
	case "1", "t", "T", "TRUE", "true", "True":
		return true
	}
	return false
}

// accepts reports whether the Accept header lists media type mt with a
// q other than 0 (wildcards are not read as naming it).
func accepts(r *http.Request, mt string) bool { return acceptQ(r, mt) > 0 }

// acceptQ is the q-value the Accept header gives media type mt, listed by
// name: its highest where it is listed more than once, 0 where it is not
// listed or excluded (q=0), 1 where its q is missing or unreadable.
func acceptQ(r *http.Request, mt string) float64 {
	best := 0.0
	for _, v := range r.Header.Values("Accept") {
		for part := range mediaRanges(v) {
			t, q, ok := mediaRange(strings.TrimSpace(part))
			if !ok || !strings.EqualFold(t, mt) {
				continue
			}
			if q > 0 {
				best = max(best, q)
			}
		}
	}
	return best
}

// mediaRanges yields the media ranges of an Accept header value: the
// parts between its commas outside quoted strings (RFC 9110 §5.6.1,
// §5.6.4: a parameter's quoted value may hold a comma, and a backslash
// quotes the next character). Split at every comma, a quoted comma cut a
// range in two and a malformed value was read in part: in
// `a/b;x="y\",text/event-stream`, one unterminated quoted string, the
// second half was read as a range (FuzzAccept).
func mediaRanges(v string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		start, quoted := 0, false
		for i := 0; i < len(v); i++ {
			switch c := v[i]; {
			case quoted && c == '\\':
				i++
			case c == '"':
				quoted = !quoted
			case c == ',' && !quoted:
				if !yield(v[start:i]) {
					return
				}
				start = i + 1
			}
		}
		yield(v[start:])
	}
}

// mediaRange is the media type of an Accept header's range and its
// q-value, false when it is none: mime.ParseMediaType's reading
// (TestMediaRangeAsMime), without its allocations for a range without
// parameters (text/event-stream, as stream clients send it), which is
// read here; one with parameters is read by it.
func mediaRange(part string) (mt string, q float64, ok bool) {
	if strings.Contains(part, ";") {
		mt, params, err := mime.ParseMediaType(part)
		return mt, qOf(params), err == nil
	}
	mt = strings.TrimSpace(strings.ToLower(part))
	typ, rest := token(mt)
	if typ == "" {
		return "", 0, false
	}
	if rest != "" {
		sub, after := "", ""
		if rest[0] == '/' {
			sub, after = token(rest[1:])
		}
		if sub == "" || after != "" {
			return "", 0, false
		}
	}
	return mt, 1, true
}

// tokenSpecials are the characters RFC 2045 keeps out of a token (its
// tspecials, as package mime reads them).
const tokenSpecials = `()<>@,;:\"/[]?=`

// token splits the token s starts with from the rest, as package mime's
// consumeToken does.
func token(s string) (tok, rest string) {
	for i := range len(s) {
		if c := s[i]; c <= 0x20 || c >= 0x7f || strings.IndexByte(tokenSpecials, c) >= 0 {
			return s[:i], s[i:]
		}
	}
	return s, ""
}

// preferred is the media type of types the Accept header ranks highest
// (RFC 9110 §12.5.1's q-values), the earlier of types on a tie; "" when
// it lists none of them. A client that prefers SSE to NDJSON
// (text/event-stream, application/x-ndjson;q=0.1) got NDJSON: only
// whether a type was listed was read.
func preferred(r *http.Request, types ...string) string {
	pick, best := "", 0.0
	for _, t := range types {
		if q := acceptQ(r, t); q > best {
			pick, best = t, q
		}
	}
	return pick
}

// acceptable reports whether the Accept headers of r allow media type mt
// (RFC 9110 §12.5.1): all types without a readable Accept header; else
// the most specific range that matches mt (mt itself, its type/*, */*)
// decides, allowing it with a q other than 0.
func acceptable(r *http.Request, mt string) bool {
	q, read := rangeQ(r, mt)
	return !read || q > 0
}

// rangeQ is the q-value the Accept headers of r give media type mt by the
// most specific range that matches it (mt itself, its type/*, */*; RFC
// 9110 §12.5.1), the highest where that range is listed more than once,
// 0 where none matches; read is false when no Accept header part could be
// read.
func rangeQ(r *http.Request, mt string) (q float64, read bool) {
	typ, _, _ := strings.Cut(mt, "/")
	spec := -1
	for _, v := range r.Header.Values("Accept") {
		for part := range mediaRanges(v) {
			t, pq, ok := mediaRange(strings.TrimSpace(part))
			if !ok {
				continue
			}
			read = true
			s := -1
			switch {
			case strings.EqualFold(t, mt):
				s = 2
			case strings.EqualFold(t, typ+"/*"):
				s = 1
			case t == "*/*":
				s = 0
			}
			if s < 0 || s < spec {
				continue
			}
			if s > spec {
				q, spec = pq, s
			} else {
				q = max(q, pq)
			}
		}
	}
	return q, read
}

// qOf is the q-value of an Accept header part's parameters: 1 when it is
// missing or unreadable, 0 for a zero (qZero).
func qOf(params map[string]string) float64 {
	v, ok := params["q"]
	switch {
	case !ok:
		return 1
	case qZero(v):
		return 0
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 && f <= 1 {
		return f
	}
	return 1
}

// qZero reports a q-value of zero: "0", "0.", "0.0", "0.00" or "0.000"
// (RFC 9110 §12.4.2's qvalue; only "0" was read as zero, so "q=0.0" did
// not exclude a type).
func qZero(q string) bool {
	return q != "" && strings.TrimRight(strings.TrimPrefix(q, "0"), "0") == "." || q == "0"
}

// ContentCoding is the first content coding r's Content-Encoding headers
// name other than identity, "" when there is none: no endpoint decodes
// one, so a body that has one is refused 415 (RFC 9110 §15.5.16) rather
// than read as it came.
func ContentCoding(r *http.Request) string {
	for _, v := range r.Header.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return c
			}
		}
	}
	return ""
}

// Accepts reports whether the Accept headers of r list the media type mt
// (with a q other than 0).
func Accepts(r *http.Request, mt string) bool { return accepts(r, mt) }

// Preferred is the media type of types r's Accept headers rank highest by
// q-value, the earlier of types on a tie; "" when they list none of them.
func Preferred(r *http.Request, types ...string) string { return preferred(r, types...) }

// NegotiateE2A is the media type of the answer to an E2A request
// ([Service.ServeE2A]): text/event-stream, application/x-ndjson or
// application/json, by the Accept headers' q-values (SSE, then NDJSON,
// then JSON on a tie; JSON when none is listed).
func NegotiateE2A(r *http.Request) string {
	// A stream is asked for by name (a wildcard never asks for one), the
	// JSON answer by any range that matches it: a stream wins with a q at
	// least the JSON's (a named NDJSON at q=0.5 beside */* was streamed
	// when only named types were read).
	js, _ := rangeQ(r, "application/json")
	pick, best := "application/json", 0.0
	for _, t := range []string{mtSSE, mtNDJSON} {
		if q := acceptQ(r, t); q > best && q >= js {
			pick, best = t, q
		}
	}
	return pick
}

// The streamed formats' media types.
const (
	mtSSE    = "text/event-stream"
	mtNDJSON = "application/x-ndjson"
)

// authorized applies WithAuthorizer and the ReadGate's rate limit; on
// refusal it answers itself: 401 without valid credentials (with the
// gate's challenge), 403 for a forbidden one (ReadGate.Refuse), the
// gate's 429, 404 for a request the principal may not read. The principal is k.p (the open one without an authorizer).
// When it looked the request up, it returns what it found (the envelope
// message, so the handler reads the same replica's answer rather than
// asking again; or, for a request E2A_REQUESTS no longer holds, its copy
// in the History, whose envelope's owner it checked).
func (s *Service) authorized(w http.ResponseWriter, r *http.Request) (known, bool) {
	p, ok := tenant.FromContext(r.Context())
	if !ok {
		if s.cfg.authorize == nil {
			p = tenant.Principal{Open: true} // the endpoints are open
		} else {
			var err error
			if p, err = s.cfg.authorize(r); err != nil {
				s.refuseCredential(w, err)
				return known{}, false
			}
		}
	}
	if !s.admit(w, r, p) {
		return known{}, false
	}
	k, allowed := s.owned(w, r, p)
	k.p = p
	return k, allowed
}

// owned is authorized's ownership check of the request the path names for
// principal p.
func (s *Service) owned(w http.ResponseWriter, r *http.Request, p tenant.Principal) (known, bool) {
	id := r.PathValue("id")
	if p.SeesAll() {
		return s.seen(w, r, id)
	}
	msg, err := s.findRequest(r.Context(), id)
	found, owner := msg != nil, ownerOf(msg)
	if err == nil && found && !p.Allows(tenant.Read, owner) {
		// The same work as for an unknown id (whose absence the stream's
		// leader confirms, then the History is asked): the answer does not
		// tell another's request from none; the timing does, by the fetch
		// and decoding of its envelope (docs/security.md), no more than a
		// request naming the id (409 conflict) tells.
		// The History's copy is p's own when the id was taken again by
		// another principal once p's request left the hot streams
		// (ingress refuses that only while they hold it): p reads its
		// request there, as before the id was taken, and never the hot
		// request's frames (known.taken).
		if _, err = confirmRequest(r.Context(), s.mux, s.streamNames().requests, id); err == nil && s.historyMay(id) {
			h, herr := s.fromHistory(r.Context(), id, p.ID)
			switch {
			case herr == nil && p.Allows(tenant.Read, ownerOfData(h.Envelope)):
				return known{hist: h, taken: true}, true
			case herr != nil && !errors.Is(herr, ErrNotFound):
				err = herr
			}
		}
	}
	if err == nil && !found && s.historyMay(id) {
		// The envelope aged out of E2A_REQUESTS: its owner is the one of
		// its copy in the History, if any (for an id without a time,
		// found around its first frame still hot: HistoryNear).
		var h *HistoricRequest
		if h, err = s.historyCopy(r.Context(), id, p.ID); h != nil && p.Allows(tenant.Read, ownerOfData(h.Envelope)) {
			return known{hist: h}, true
		}
	}
	if err != nil {
		WriteError(w, err)
		return known{}, false
	}
	if !found || !p.Allows(tenant.Read, owner) {
		WriteError(w, ErrNotFound)
		return known{}, false
	}
	return known{env: msg}, true
}

// seen is owned for a principal that sees every request (the audit role;
// every reader with authentication off): nothing to check, but a request
// whose envelope aged out of E2A_REQUESTS while some of its frames are
// still hot (the streams drop their oldest messages first) is answered
// from its copy in the History, as to its owner; the hot remainder alone
// starts after frame 0, and the JSON answer has no envelope. A request the
// History cannot be asked for (no History, or no time in its id and no
// HistoryNear) is not looked up.
func (s *Service) seen(w http.ResponseWriter, r *http.Request, id string) (known, bool) {
	if !s.historyMay(id) {
		return known{}, true
	}
	msg, err := s.findRequest(r.Context(), id)
	if err == nil && msg != nil {
		return known{env: msg}, true
	}
	var h *HistoricRequest
	if err == nil {
		h, err = s.historyCopy(r.Context(), id, "")
	}
	switch {
	case err != nil:
		WriteError(w, err)
		return known{}, false
	case h != nil:
		return known{hist: h}, true
	}
	return known{asked: true}, true
}

// historyCopy is fromHistory with none found (ErrNotFound) as nil, nil.
func (s *Service) historyCopy(ctx context.Context, id, user string) (*HistoricRequest, error) {
	h, err := s.fromHistory(ctx, id, user)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return h, err
}

// Owner returns the owner of a request: the user_id of its stored envelope.
// found is false when E2A_REQUESTS does not hold the request (the stream's
// leader confirms an absence, see lookupRequest); owner is "" then, and
// when the stored message is not an envelope. Callers check it with
// tenant.Principal.Allows.
func (s *Service) Owner(ctx context.Context, requestID string) (owner string, found bool, err error) {
	msg, err := s.findRequest(ctx, requestID)
	return ownerOf(msg), msg != nil, err
}

// StoredOwner is Owner in one direct get, which any replica may answer:
// an absence is not confirmed by the stream's leader. Ingress asks it
// before it records a turn whose id the client chose in the caller's task
// (a request stored so recently that a lagging replica misses it is still
// found by the turn's publish, which expects no message of the id).
func (s *Service) StoredOwner(ctx context.Context, requestID string) (owner string, found bool, err error) {
	subj, err := requestLookupSubject(requestID)
	if err != nil {
		return "", false, nil
	}
	msg, err := s.mux.GetLast(ctx, s.streamNames().requests, subj)
	return ownerOf(msg), msg != nil, err
}

// FramesStored reports whether E2A_RESPONSES holds a frame of the request,
// in one direct get. Ingress asks it before it takes a request id a client
// chose: the frames of a request outlive its envelope (they are stored
// after it, and the streams' limits drop them apart), and a newcomer under
// the same id would read them as its own answer.
func (s *Service) FramesStored(ctx context.Context, requestID string) (bool, error) {
	subj, err := responseSubject(requestID)
	if err != nil {
		return false, nil
	}
	msg, err := s.mux.GetLast(ctx, s.streamNames().responses, subj)
	return msg != nil, err
}

// findRequest reads the envelope message of a request (nil for one the
// request stream does not hold, see lookupRequest).
func (s *Service) findRequest(ctx context.Context, requestID string) (*nats.Msg, error) {
	return lookupRequest(ctx, s.mux, s.streamNames().requests, requestID)
}

// ownerOf returns the user_id of a stored envelope message ("" for none, or
// for a message that is not an envelope).
func ownerOf(msg *nats.Msg) string {
	if msg == nil {
		return ""
	}
	return ownerOfData(msg.Data)
}

// ownerOfData returns the user_id of a stored envelope ("" for one that is
// not an envelope).
func ownerOfData(data []byte) string {
	var probe struct {
		UserID string `json:"user_id"`
	}
	_ = jsonUnmarshal(data, &probe)
	return probe.UserID
}
