package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/option"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Defaults of the replay engine.
const (
	DefaultResponsesStream = streams.ResponsesStream
	DefaultRequestsStream  = streams.RequestsStream
	DefaultBatch           = 64
	DefaultBatchBytes      = 1 << 20
	DefaultLiveBuffer      = 64
	DefaultLiveBytes       = 16 << 20
	DefaultHeartbeat       = 15 * time.Second
	DefaultPollInterval    = 2 * time.Second
	DefaultMaxWait         = 5 * time.Minute
	DefaultIdleTimeout     = 10 * time.Minute

	// firstPoll is the poll interval of a reader's first wait: it covers
	// the moment right after the switch to live, when in a cluster the
	// subscription's interest may not have reached the stream leader yet
	// and the replica that answered the catch-up may have lagged it.
	firstPoll = 200 * time.Millisecond
)

// ReplayOption configures a [Reader]. Options validate their arguments:
// Open, Replay and New (through WithReplayOptions) return an error wrapping
// ErrInvalidOption for a bad one.
type ReplayOption func(*replayConfig) error

type replayConfig struct {
	// timers, when set (a Service's reads), holds the stopped wait timers
	// of its closed readers for the next ones' waits: a stream read armed
	// up to four new timers (3 allocations each) per request. One pool per
	// service, not per process: a reader's timers belong to the clock of
	// the goroutines that made them (a synctest bubble's or the real one).
	timers       *sync.Pool
	responses    string
	requests     string
	batch        int
	batchBytes   int
	liveBuffer   int
	liveBytes    int64
	heartbeat    time.Duration
	onHeartbeat  func() error
	waits        waitHooks
	headHold     time.Duration
	pollInterval time.Duration
	firstPoll    time.Duration
	waitLimits
	checkRequest bool
	lazy         bool // render.Frame.Response is left nil: decoded on demand
	mux          *streams.DirectGetter
	get          batchGetter
	prepared     *Prepared // a subscription made before the publish (Prepare)
	// before is given each frame stored before the resume point, decoded,
	// once, in order, as the read meets it (withBefore).
	before func(f *render.Frame) error
	// agedOut, when set, tells Open whether a request of which the stream
	// holds no frame was answered and its frames aged out; env is its
	// envelope message when the caller read it (withAgedOut).
	agedOut func(ctx context.Context, id string, env *nats.Msg) (bool, error)
	env     *nats.Msg
	// firstStored: a read whose first frames aged out starts at the first
	// one stored (WithFirstStored).
	firstStored bool
	// countAs is the format a protocol's answer read through
	// Service.OpenReader or OpenPrepared is counted and spanned as
	// (CountedAs); count is that answer's account (answerCount).
	countAs string
	count   *answerCount
}

// batchGetter reads up to batch messages stored under subject in stream
// from stream sequence start on and calls fn with each (its stream
// sequence, headers and data); it returns how many remain after the last.
type batchGetter func(ctx context.Context, stream, subject string, start uint64, batch, maxBytes int, fn func(seq uint64, h nats.Header, data []byte) error) (pending uint64, err error)

func defaultReplayConfig() replayConfig {
	return replayConfig{
		responses:    DefaultResponsesStream,
		requests:     DefaultRequestsStream,
		batch:        DefaultBatch,
		batchBytes:   DefaultBatchBytes,
		liveBuffer:   DefaultLiveBuffer,
		liveBytes:    DefaultLiveBytes,
		heartbeat:    DefaultHeartbeat,
		pollInterval: DefaultPollInterval,
		firstPoll:    firstPoll,
		waitLimits:   defaultWaitLimits,
		checkRequest: true,
	}
}

// WithStreams names the response and request streams (defaults
// E2A_RESPONSES and E2A_REQUESTS; an empty name keeps the default). A name
// with a dot, a wildcard or white space is refused.
func WithStreams(responses, requests string) ReplayOption {
	return func(c *replayConfig) error {
		if strings.ContainsAny(responses, streamNameRefused) || strings.ContainsAny(requests, streamNameRefused) {
			return invalid("stream names %q, %q", responses, requests)
		}
		if responses != "" {
			c.responses = responses
		}
		if requests != "" {
			c.requests = requests
		}
		return nil
	}
}

// streamNameRefused are the characters no JetStream stream name holds.
const streamNameRefused = ".*> \t\r\n/\\"

// WithBatch sets how many frames one direct get reads (default 64) and the
// byte bound of one batch (default 1 MiB); zero keeps a default, a negative
// value is refused. Together with the live buffer it bounds the memory a
// reader holds.
func WithBatch(frames, maxBytes int) ReplayOption {
	return func(c *replayConfig) error {
		if frames < 0 || maxBytes < 0 {
			return invalid("batch of %d frames, %d bytes", frames, maxBytes)
		}
		if frames > 0 {
			c.batch = frames
		}
		if maxBytes > 0 {
			c.batchBytes = maxBytes
		}
		return nil
	}
}

// WithLiveBuffer sets how many live messages a reader buffers (default 64).
// Live messages beyond it are dropped and read again from the stream.
// n outside 1..MaxLiveBuffer is refused (a channel that size, made per
// stream, could not be).
func WithLiveBuffer(n int) ReplayOption {
	return option.Check(ErrInvalidOption, n >= 1 && n <= MaxLiveBuffer, func(c *replayConfig) { c.liveBuffer = n },
		"live buffer %d not in 1..%d", n, MaxLiveBuffer)
}

// MaxLiveBuffer bounds WithLiveBuffer.
const MaxLiveBuffer = 1 << 16

// WithLiveBytes bounds the bytes a reader's live buffer may hold (default
// 16 MiB): it holds fewer messages than WithLiveBuffer's when that many of
// the largest message the server takes (its max_payload, 8 MB in
// deploy/nats) could hold more, one at least. A reader whose client stopped
// reading stops taking live messages, which wait in its buffer meanwhile:
// bounded in messages alone, 64 of them held up to 512 MiB. n ≤ 0 is
// refused.
func WithLiveBytes(n int64) ReplayOption {
	return option.Check(ErrInvalidOption, n > 0, func(c *replayConfig) { c.liveBytes = n }, "live buffer of %d bytes ≤ 0", n)
}

// liveCapacity is the size of a live channel on a connection to a server
// whose max_payload is maxPayload (≤ 0: unknown): the live buffer, fewer
// messages when that many could hold more than the live bytes, one at
// least.
func (c *replayConfig) liveCapacity(maxPayload int64) int {
	if maxPayload <= 0 {
		return c.liveBuffer
	}
	return int(min(int64(c.liveBuffer), max(1, c.liveBytes/maxPayload)))
}

// WithHeartbeat calls fn after every interval spent waiting for a frame,
// including before the first one: the interval starts again when a frame
// is given, not when the reader polls the stream (its poll interval may be
// the shorter). fn runs on the goroutine that called Next; an error from
// fn ends the read with that error. interval ≤ 0 and a nil fn are refused.
func WithHeartbeat(interval time.Duration, fn func() error) ReplayOption {
	return option.Check(ErrInvalidOption, interval > 0 && fn != nil,
		func(c *replayConfig) { c.heartbeat, c.onHeartbeat = interval, fn },
		"heartbeat every %v (func set: %t)", interval, fn != nil)
}

// WithPollInterval sets how long a reader waits on the live subject before
// it also reads the stream (default 2 s). Live delivery is at most once
// (republish is core NATS, and in a cluster the interest of a new
// subscription reaches the stream leader asynchronously), so the poll is
// what guarantees progress. d ≤ 0 is refused.
func WithPollInterval(d time.Duration) ReplayOption {
	return option.Check(ErrInvalidOption, d > 0, func(c *replayConfig) { c.pollInterval = d }, "poll interval %v ≤ 0", d)
}

// WithMaxWait bounds the wait for the first frame of an accepted request
// that has not been answered yet (default 5 min), and the wait for any
// next frame (idle, default 10 min), each counted from when the reader
// starts waiting for that frame (its polls of the stream in between do not
// restart it). A zero duration keeps the default; a negative one waits
// without limit. Exceeding either ends the read with ErrWaitTimeout.
// Every duration has a meaning, so none is refused.
func WithMaxWait(first, idle time.Duration) ReplayOption {
	return func(c *replayConfig) error { c.waitLimits.set(first, idle); return nil }
}

// waitLimits bound a reader's waits: for the first frame of a request not
// answered yet (maxWait) and for any next frame (idleTimeout); negative:
// no limit. Readers (WithMaxWait) and the Service (WithWaitLimits) take
// them the same way.
type waitLimits struct {
	maxWait     time.Duration
	idleTimeout time.Duration
}

var defaultWaitLimits = waitLimits{maxWait: DefaultMaxWait, idleTimeout: DefaultIdleTimeout}

// set replaces the limits given: a zero duration keeps the current one.
func (w *waitLimits) set(first, idle time.Duration) {
	if first != 0 {
		w.maxWait = first
	}
	if idle != 0 {
		w.idleTimeout = idle
	}
}

// WithoutRequestCheck skips the lookup of the envelope in E2A_REQUESTS when
// the request has no frame yet (the caller knows the request exists, e.g.
// ingress right after its publish was acknowledged).
func WithoutRequestCheck() ReplayOption {
	return func(c *replayConfig) error { c.checkRequest = false; return nil }
}

// waitHooks are what a reader calls around its waits: the Service's
// [render.Output] (an interface, so that no closure is made per stream).
type waitHooks interface {
	// BeforeWait runs whenever the reader has nothing to deliver and is
	// about to wait for live frames or to read the stream: the Service
	// flushes its response then, so that frames that arrive together go
	// out in one write, and none waits in a buffer while the reader waits.
	BeforeWait() error
	// HeadHoldOver runs once when the reader has waited its head hold, in
	// one wait or several, before giving its first frame (frames before
	// the resume point, read and dropped, do not count).
	HeadHoldOver() error
}

// applyReplay applies opts to c; a nil option or one that refuses its
// arguments is an error wrapping ErrInvalidOption.
func applyReplay(c *replayConfig, opts []ReplayOption) error {
	return option.Apply(ErrInvalidOption, c, opts)
}

// withWaitHooks has the reader call h around its waits; hold > 0 arms the
// head hold: the Service holds the head of its response (status line,
// headers, the renderer's opening event) until the first frame, so that
// both go out in one write, and sends it alone only when the first frame
// is that late.
func withWaitHooks(h waitHooks, hold time.Duration) ReplayOption {
	return func(c *replayConfig) error { c.waits, c.headHold = h, hold; return nil }
}

// withBefore gives fn each frame stored before the resume point, decoded,
// once and in order, as the read meets it (a render.Primer's Prime): the
// reader reads them to find the resume point anyway. A frame that does not
// decode is not given.
func withBefore(fn func(f *render.Frame) error) ReplayOption {
	return func(c *replayConfig) error { c.before = fn; return nil }
}

// giveBefore gives cfg.before the frame data, stored before the resume
// point in the message at stream sequence streamSeq.
func (r *Reader) giveBefore(streamSeq uint64, data []byte) error {
	resp, err := e2a.UnmarshalResponse(data)
	if err != nil {
		return nil
	}
	return r.cfg.before(&render.Frame{Response: resp, Raw: data, StreamSeq: streamSeq})
}

// withAgedOut has Open, when the stream holds no frame of the request,
// ask agedOut whether it was answered all the same (its frames aged out of
// E2A_RESPONSES), and end with ErrFramesExpired then rather than wait for
// a first frame that will never come. env is the request's envelope
// message when the caller read it; without it Open's own lookup gives it
// (nil with WithoutRequestCheck: nothing is asked).
func withAgedOut(agedOut func(ctx context.Context, id string, env *nats.Msg) (bool, error), env *nats.Msg) ReplayOption {
	return func(c *replayConfig) error { c.agedOut, c.env = agedOut, env; return nil }
}

// WithFirstStored makes a read whose first stored frame lies past its
// resume point (the frames before aged out of E2A_RESPONSES) begin at that
// frame, the reader's expired set, instead of ending with ErrFramesExpired:
// a task's view is rebuilt from what remains (LoadRequests), and so is an
// ACP session's replay (session/load); the first frame's sequence then
// tells a reader that the ones before it are gone.
func WithFirstStored() ReplayOption {
	return func(c *replayConfig) error { c.firstStored = true; return nil }
}

// agedStart begins the read at seq, the first stored frame met, when it
// lies past the resume point and WithFirstStored allows it.
func (r *Reader) agedStart(seq int64, live bool) {
	if r.cfg.firstStored && !r.any && !live && seq > r.next {
		r.next, r.from, r.expired = seq, seq, true
	}
}

func withMux(m *streams.DirectGetter) ReplayOption {
	return func(c *replayConfig) error { c.mux = m; return nil }
}

// WithoutDecode makes the reader decode only the head of each frame
// (sequence, is_final, response_kind): Frame.Response stays nil and is
// decoded by Frame.Decoded when a renderer needs it. The E2A pass-through
// renderers write Raw and never do; a protocol's answers that read plain
// text chunks with [render.ReadTextChunk] decode the other frames.
func WithoutDecode() ReplayOption { return func(c *replayConfig) error { c.lazy = true; return nil } }

// Reader delivers the frames of one request in order, exactly once, from a
// resume point to the final frame: first what E2A_RESPONSES already holds
// (batched direct gets, no consumer), then the live frames republished on
// e2a.live.<id>, refilling from the stream whatever the live subscription
// missed. A message holding a burst of frames (its E2A-Frames header) is
// taken whole: its frames are delivered one by one, in order, those before
// the resume point dropped. It is not safe for concurrent use.
type Reader struct {
	nc        *nats.Conn
	cfg       replayConfig
	requestID string
	respSubj  string
	ownMux    bool

	sub  *nats.Subscription
	live chan *nats.Msg
	// dropped is how many live messages the subscription had dropped (its
	// channel full) when the stream was last read: more since means frames
	// to read again from the stream.
	dropped int

	queue []render.Frame
	head  int

	scratch render.Head // the head of the frame being accepted

	next     int64  // E2A sequence of the next frame to deliver
	from     int64  // the resume point
	primed   int64  // the last frame before it given to cfg.before (-1: none)
	lastSeq  uint64 // stream sequence of the last message read for this request
	caughtUp bool   // the stream held nothing more at the last read
	done     bool   // the final frame was delivered, or lies before the resume point
	any      bool   // some frame of this request was seen
	closed   bool
	waited   bool // the first wait happened
	held     bool // the head hold ran out (headHoldOver was called)
	gave     bool // Next returned a frame (frames before the resume point are not given)
	// ended is the final frame when it lies before the resume point (done
	// then, and nothing is queued).
	ended render.Frame
	// expired: the first frames aged out, the read began at the first
	// stored (WithFirstStored).
	expired bool

	// The wait for the next frame began at waitStart (the first wait after
	// the last frame given, or after Open; zero: no wait since), and the
	// next heartbeat is due at nextBeat. They are times, not timers
	// restarted by each wait: wait returns at every poll of the stream (or
	// live message that gives no frame) and is entered again, which must
	// not push back the wait limits or the heartbeats.
	waitStart time.Time
	nextBeat  time.Time

	// Timers of wait, reused from one wait to the next (created on first
	// use, stopped when wait returns), armed with the time remaining.
	deadlineT *time.Timer
	pollT     *time.Timer
	beatT     *time.Timer
	holdT     *time.Timer // runs from the first wait until a frame is given or the hold ends
}

// Open subscribes to the live subject of requestID, then reads the first
// batch of stored frames from sequence from (0 for the start). When the
// stream holds no frame for the request, it checks that the request was
// accepted (its envelope is in E2A_REQUESTS) and returns ErrNotFound
// otherwise. When the first frame stored lies past from (the frames the
// read needs aged out of E2A_RESPONSES), it returns ErrFramesExpired.
// Close the reader when done.
func Open(ctx context.Context, nc *nats.Conn, requestID string, from int64, opts ...ReplayOption) (*Reader, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: nil NATS connection", ErrInvalidOption)
	}
	if from < 0 {
		return nil, badRequest("resume point %d is negative", from)
	}
	cfg := defaultReplayConfig()
	if err := applyReplay(&cfg, opts); err != nil {
		return nil, err
	}
	respSubj, err := subjects.Response(requestID)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	liveSubj, err := subjects.Live(requestID)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	r := &Reader{nc: nc, cfg: cfg, requestID: requestID, respSubj: respSubj, next: from, from: from, primed: -1}
	if r.cfg.mux == nil {
		m, err := streams.NewDirectGetter(nc)
		if err != nil {
			return nil, err
		}
		r.cfg.mux, r.ownMux = m, true
	}
	if r.cfg.get == nil {
		r.cfg.get = r.cfg.mux.GetBatch
	}
	fresh := false
	if p := cfg.prepared; p != nil && p.sub != nil && p.requestID == requestID {
		// Subscribed before the publish (Prepare): a fresh request has no
		// frame stored before the subscription, so there is nothing to read.
		r.sub, r.live, fresh = p.sub, p.live, p.fresh
		p.sub = nil
	} else {
		r.live = make(chan *nats.Msg, cfg.liveCapacity(nc.MaxPayload()))
		// Subscribe before the first read: the server handles a
		// connection's protocol in order, so every frame stored after the
		// read below is republished to this subscription, and one stored in
		// between is seen twice and dropped by sequence.
		// The connection's reader delivers into the channel (no goroutine
		// and hand-off per subscription); when it is full the message is
		// dropped and counted (lost).
		r.sub, err = nc.ChanSubscribe(liveSubj, r.live)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("egress: subscribe %s: %w", liveSubj, err)
		}
	}
	if fresh {
		r.caughtUp = true // the stream holds nothing the subscription will not bring
		return r, nil
	}
	if err := r.fill(ctx); err != nil {
		r.Close()
		return nil, err
	}
	if !r.any {
		if err := r.unstarted(ctx); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// unstarted checks a request of which the stream holds no frame: that it
// was accepted (its envelope is in E2A_REQUESTS; not with
// WithoutRequestCheck), ErrNotFound otherwise, and, with withAgedOut,
// that it is not one answered whose frames aged out (ErrFramesExpired).
// A check that fails leaves the request taken for one not answered yet:
// the reader waits for its first frame, as it always did.
func (r *Reader) unstarted(ctx context.Context) error {
	env := r.cfg.env
	if r.cfg.checkRequest {
		// lookupRequest asks the stream's leader before it answers none: a
		// request accepted a moment ago is found even when the replica
		// that answered the frames' direct get lags.
		msg, err := lookupRequest(ctx, r.cfg.mux, r.cfg.requests, r.requestID)
		if err != nil {
			return err
		}
		if msg == nil {
			return fmt.Errorf("%w: %q", ErrNotFound, r.requestID)
		}
		env = msg
	}
	if r.cfg.agedOut == nil || env == nil {
		return nil
	}
	if gone, err := r.cfg.agedOut(ctx, r.requestID, env); err == nil && gone {
		return framesExpired(r.requestID, "it was answered, and no frame of it is stored any more")
	}
	return nil
}

// RequestID returns the id of the request being read.
func (r *Reader) RequestID() string { return r.requestID }

// NextSequence returns the sequence of the next frame Next will deliver.
func (r *Reader) NextSequence() int64 { return r.next - int64(len(r.queue)-r.head) }

// Started reports whether the request has at least one frame.
func (r *Reader) Started() bool { return r.any }

// Close stops the live subscription. It is safe to call more than once.
func (r *Reader) Close() {
	if r.closed {
		return
	}
	r.closed = true
	if r.cfg.count != nil {
		r.cfg.count.end()
	}
	r.deadlineT = r.releaseTimer(r.deadlineT)
	r.pollT = r.releaseTimer(r.pollT)
	r.beatT = r.releaseTimer(r.beatT)
	r.holdT = r.releaseTimer(r.holdT)
	if r.sub != nil {
		_ = r.sub.Unsubscribe()
	}
	if r.ownMux {
		r.cfg.mux.Close()
	}
}

// Next returns the next frame. After the final frame it returns io.EOF.
// It blocks while the request is running, calling the heartbeat function
// while idle, and returns ErrWaitTimeout when the wait limits pass,
// ErrFramesExpired when the first frame it reads lies past the resume
// point (the frames before aged out) or its next frames aged out while it
// read (a slow reader behind the stream's front), or the context's error.
func (r *Reader) Next(ctx context.Context) (render.Frame, error) {
	if r.cfg.count != nil {
		f, err := r.read(ctx)
		r.cfg.count.read(err == nil && f.IsFinal(), err)
		return f, err
	}
	return r.read(ctx)
}

// read is Next, uncounted.
func (r *Reader) read(ctx context.Context) (render.Frame, error) {
	for {
		if r.head < len(r.queue) {
			f := r.queue[r.head]
			r.queue[r.head] = render.Frame{}
			r.head++
			if r.head == len(r.queue) {
				r.queue, r.head = r.queue[:0], 0
			}
			if f.IsFinal() {
				// Nothing follows a final frame: frames stored after it
				// (published on the subjects by hand) are not given.
				r.done = true
				clear(r.queue[r.head:])
				r.queue, r.head = r.queue[:0], 0
			}
			r.gave = true
			r.waitStart = time.Time{} // the wait for the next frame starts afresh
			return f, nil
		}
		if r.done {
			return render.Frame{}, io.EOF
		}
		if r.closed {
			return render.Frame{}, errors.New("egress: reader closed")
		}
		if !r.caughtUp || r.lost() {
			if err := r.idle(); err != nil {
				return render.Frame{}, err
			}
			if err := r.fill(ctx); err != nil {
				return render.Frame{}, err
			}
			continue
		}
		if err := r.wait(ctx); err != nil {
			return render.Frame{}, err
		}
	}
}

// lost reports whether the live subscription dropped messages since the
// stream was last read.
func (r *Reader) lost() bool {
	n, err := r.sub.Dropped()
	return err == nil && n > r.dropped
}

// idle runs the before-wait function, if any.
func (r *Reader) idle() error {
	if r.cfg.waits == nil {
		return nil
	}
	return r.cfg.waits.BeforeWait()
}

// directGetAttempt bounds one batched direct get (a few ms normally).
const directGetAttempt = 3 * time.Second

// fill reads one batch from the stream after the last frame read.
func (r *Reader) fill(ctx context.Context) error {
	if r.sub != nil {
		if n, err := r.sub.Dropped(); err == nil {
			r.dropped = n
		}
	}
	// A direct get whose answering server dies mid-reply is never closed:
	// each attempt is bounded and retried from the last frame accepted
	// (accept drops what an earlier attempt already delivered).
	var pending uint64
	var err error
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, directGetAttempt)
		pending, err = r.cfg.get(actx, r.cfg.responses, r.respSubj, r.lastSeq+1, r.cfg.batch, r.cfg.batchBytes, func(seq uint64, h nats.Header, data []byte) error {
			return r.accept(seq, h, data, false)
		})
		cancel()
		if err == nil || ctx.Err() != nil || attempt >= 3 ||
			!(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders)) {
			break
		}
	}
	if err != nil {
		if errors.Is(err, errStoredGap) && r.frontPassed(ctx) {
			return framesExpired(r.requestID, "its next frames aged out while it was read")
		}
		return unanswered(ctx, err, r.requestID, "frames")
	}
	r.caughtUp = pending == 0 || r.done
	return nil
}

// unanswered is err, a read of a stream that ended by its own bound
// (directGetAttempt, streams.DefaultDirectGetTimeout) while ctx, the
// caller's, is live, as what it is: the NATS server did not answer,
// nats.ErrTimeout, which is unavailable (503, retryable: the broker, not
// the request). Left as context.DeadlineExceeded it read as the caller's
// own deadline (timeout, 504), and a stream whose server fell silent
// ended with the error timeout. An error of ctx's own deadline stays.
// what names what was read of request id ("frames", "envelope").
func unanswered(ctx context.Context, err error, id, what string) error {
	if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("egress: request %q: its %s could not be read, no answer from the NATS server: %w", id, what, nats.ErrTimeout)
}

// errStoredGap marks a stored frame found past the one expected after
// earlier frames of the request were read.
var errStoredGap = errors.New("a gap in the stored frames")

// frontPassed reports whether E2A_RESPONSES dropped messages stored after
// the last one read for the request: its first message is later than the
// next one. The stream drops its oldest messages only (its byte bound,
// DiscardOld; its max age), so frames missing behind such a front aged out
// while a slow reader read them (frames_expired, the audit copy named),
// where a gap behind an older front is a hole in the stored frames
// (invalid_frame). Read on that error only: one stream info request.
func (r *Reader) frontPassed(ctx context.Context) bool {
	js, err := jetstream.New(r.nc)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, directGetAttempt)
	defer cancel()
	st, err := js.Stream(ctx, r.cfg.responses)
	if err != nil {
		return false
	}
	return st.CachedInfo().State.FirstSeq > r.lastSeq+1
}

// accept takes one stored or live message: one frame, or a burst of them
// (acceptBurst). Frames before the resume point or already delivered are
// dropped; a frame after a gap triggers a read of the stream (live) or is
// an error (stored: the stream itself has a hole).
func (r *Reader) accept(streamSeq uint64, hdr nats.Header, data []byte, live bool) error {
	if streamSeq != 0 && streamSeq <= r.lastSeq {
		return nil // already read
	}
	if count := hdr.Get(subjects.HeaderFrames); count != "" {
		return r.acceptBurst(streamSeq, hdr, count, data, live)
	}
	seq, ok := headerInt(hdr, subjects.HeaderSequence)
	haveHead := false
	if !ok {
		head := &r.scratch
		if err := head.Decode(data); err != nil || head.Sequence == render.NoSequence {
			return fmt.Errorf("%w: request %q stream sequence %d: no sequence", ErrInvalidFrame, r.requestID, streamSeq)
		}
		seq, haveHead = head.Sequence, true
	}
	if err := checkPlace(r.requestID, streamSeq, seq); err != nil {
		return err
	}
	_, err := r.acceptFrame(streamSeq, seq, haveHead, data, live)
	return err
}

// maxFirstSequence bounds the sequence of the first frame of any stored
// message, so that the sequences of a burst (first+i) never overflow.
const maxFirstSequence = math.MaxInt64 - e2a.MaxBurstFrames

// checkPlace checks the sequence of the first frame of a stored message
// against the frame contract (spec §12.3: a request's frames are numbered
// from 0, each one more than the one before): not negative, and no more
// than the frames before it can number. Those were stored in the messages
// before it in the stream (streamSeq-1 of them; streamSeq 0: unknown), each
// holding e2a.MaxBurstFrames frames at most, whatever aged out or was
// purged since. A sequence past that (MaxInt64, say) is no frame any writer
// could have stored: invalid_frame, not frames aged out (frames_expired).
func checkPlace(id string, streamSeq uint64, first int64) error {
	limit := int64(maxFirstSequence)
	if streamSeq > 0 && streamSeq-1 <= maxFirstSequence/e2a.MaxBurstFrames {
		limit = int64(streamSeq-1) * e2a.MaxBurstFrames
	}
	if first < 0 || first > limit {
		return fmt.Errorf("%w: request %q stream sequence %d: sequence %d out of range (0 to %d)", ErrInvalidFrame, id, streamSeq, first, limit)
	}
	return nil
}

// frameHead reads into r.scratch the head of data, stored as frame seq
// (haveHead: r.scratch holds it already), and checks that it is that
// frame: a JSON object whose own sequence (a required member, spec §12.4)
// is seq. null, {} or a header naming another place than the body's are
// no frame: invalid_frame, however far the read is.
func (r *Reader) frameHead(seq int64, haveHead bool, data []byte) error {
	head := &r.scratch
	if !haveHead {
		if err := head.Decode(data); err != nil {
			return fmt.Errorf("%w: request %q sequence %d: %v", ErrInvalidFrame, r.requestID, seq, err)
		}
	}
	return sequenceMismatch(r.requestID, seq, head.Sequence)
}

// sequenceMismatch is nil when body, a frame's own sequence
// (render.NoSequence: none), is seq, the one its place (its E2A-Sequence
// header) gives it, and an invalid_frame error otherwise.
func sequenceMismatch(id string, seq, body int64) error {
	switch body {
	case seq:
		return nil
	case render.NoSequence:
		return fmt.Errorf("%w: request %q: header sequence %d, the body has no sequence", ErrInvalidFrame, id, seq)
	}
	return fmt.Errorf("%w: request %q: header sequence %d, body sequence %d", ErrInvalidFrame, id, seq, body)
}

// acceptBurst takes a message holding count frames (its E2A-Frames header,
// e2a.BurstCount): frame i has sequence first+i, first being its
// E2A-Sequence header (else the first frame's own sequence). The message is
// taken whole or not at all: its frames are checked and queued in order,
// those before the next sequence to deliver dropped, and any error (a
// malformed burst, a frame that does not decode or whose sequence is not
// its place's, a final frame before its last) leaves the reader as it was.
// The frames' Raw are sub-slices of data.
func (r *Reader) acceptBurst(streamSeq uint64, hdr nats.Header, count string, data []byte, live bool) error {
	n, err := e2a.CheckBurst(count, data)
	if err != nil {
		return fmt.Errorf("%w: request %q stream sequence %d: %w", ErrInvalidFrame, r.requestID, streamSeq, err)
	}
	first, ok := headerInt(hdr, subjects.HeaderSequence)
	haveHead := false
	if !ok {
		head := &r.scratch
		if frame, _ := e2a.NextInBurst(data); head.Decode(frame) != nil || head.Sequence == render.NoSequence {
			return fmt.Errorf("%w: request %q stream sequence %d: no sequence", ErrInvalidFrame, r.requestID, streamSeq)
		}
		first, haveHead = head.Sequence, true
	}
	if err := checkPlace(r.requestID, streamSeq, first); err != nil {
		return err
	}
	if n == 1 {
		_, err := r.acceptFrame(streamSeq, first, haveHead, data, live)
		return err
	}
	r.agedStart(first, live)
	if first > r.next {
		// A gap before the burst: acceptFrame reads the stream (live) or
		// fails (stored) without looking at the frame.
		_, err := r.acceptFrame(streamSeq, first, false, nil, live)
		return err
	}
	queued, next, lastSeq, anyFrame, done, caughtUp := len(r.queue), r.next, r.lastSeq, r.any, r.done, r.caughtUp
	rest := data
	for i := range n {
		var frame []byte
		frame, rest = e2a.NextInBurst(rest)
		final, err := r.acceptFrame(streamSeq, first+int64(i), haveHead && i == 0, frame[:len(frame):len(frame)], live)
		if err == nil && final && i < n-1 {
			err = fmt.Errorf("%w: request %q stream sequence %d: final frame %d of a burst of %d is not its last", ErrInvalidFrame, r.requestID, streamSeq, first+int64(i), n)
		}
		if err != nil {
			clear(r.queue[queued:])
			r.queue = r.queue[:queued]
			r.next, r.lastSeq, r.any, r.done, r.caughtUp = next, lastSeq, anyFrame, done, caughtUp
			return err
		}
	}
	return nil
}

// acceptFrame takes frame seq of a message (data is the frame alone),
// stored at streamSeq; haveHead reports that r.scratch holds its head
// already. final reports a final frame, queued now or lying before the
// resume point (a frame queued earlier is not looked at again).
func (r *Reader) acceptFrame(streamSeq uint64, seq int64, haveHead bool, data []byte, live bool) (final bool, err error) {
	r.agedStart(seq, live)
	head := &r.scratch
	pending := int64(len(r.queue) - r.head)
	expect := r.next
	if r.done && seq >= expect {
		// A final frame before the resume point ended the request:
		// nothing after it is given (a frame stored after it by hand).
		return false, nil
	}
	switch {
	case seq < expect:
		// Before the resume point or a duplicate. A final frame before the
		// resume point still ends the read. Its head read as every reader
		// reads it (render.Head: keys matched as encoding/json does,
		// whatever their case). One that is no frame is invalid_frame
		// here too, as where it is delivered: a read resumed past it meets
		// it all the same.
		queued := seq >= expect-pending
		if !queued {
			if err := r.frameHead(seq, haveHead, data); err != nil {
				return false, err
			}
		}
		if r.cfg.before != nil && seq < r.from && seq > r.primed {
			r.primed = seq
			if err := r.giveBefore(streamSeq, data); err != nil {
				return false, err
			}
		}
		if streamSeq > r.lastSeq {
			r.lastSeq = streamSeq
		}
		r.any = true
		if queued {
			return false, nil
		}
		if head.IsFinal {
			r.done = true
			r.ended = head.Frame(data, streamSeq)
			return true, nil
		}
		return false, nil
	case seq > expect:
		if live {
			r.caughtUp = false // a gap: read the stream
			return false, nil
		}
		if !r.any {
			// The first frame stored is past the one the read needs:
			// the stream dropped its oldest messages (the frames aged
			// out), no hole of the agent's making (it writes them in
			// order, each fenced on the one before).
			return false, framesExpired(r.requestID, fmt.Sprintf("the first frame stored is %d where %d was needed", seq, expect))
		}
		return false, fmt.Errorf("%w: request %q: stored sequence %d where %d was expected (%w)", ErrInvalidFrame, r.requestID, seq, expect, errStoredGap)
	}
	var f render.Frame
	if r.cfg.lazy || seq == 0 {
		// A decoded frame 0 has its head read too: a body without a
		// sequence (null, {}) decodes as sequence 0.
		if err := r.frameHead(seq, haveHead, data); err != nil {
			return false, err
		}
	}
	if r.cfg.lazy {
		f = head.Frame(data, streamSeq)
	} else {
		resp, err := e2a.UnmarshalResponse(data)
		if err != nil {
			return false, fmt.Errorf("%w: request %q sequence %d: %v", ErrInvalidFrame, r.requestID, seq, err)
		}
		f = render.Frame{Response: resp, Raw: data, StreamSeq: streamSeq}
		if err := sequenceMismatch(r.requestID, seq, f.Sequence()); err != nil {
			return false, err
		}
	}
	r.queue = append(r.queue, f)
	r.next = seq + 1
	r.any = true
	if streamSeq > r.lastSeq {
		r.lastSeq = streamSeq
	}
	final = f.IsFinal()
	if final {
		r.caughtUp = true
	}
	return final, nil
}

// wait blocks for live messages until something is queued, a read of the
// stream is due, or a limit passes. The wait limit and the heartbeats run
// from the start of the wait for the next frame (r.waitStart), across
// however many calls of wait that takes.
func (r *Reader) wait(ctx context.Context) error {
	now := time.Now()
	if r.waitStart.IsZero() {
		r.waitStart, r.nextBeat = now, now.Add(r.cfg.heartbeat)
	}
	limit := r.cfg.idleTimeout
	if !r.any {
		limit = r.cfg.maxWait
	}
	var deadline <-chan time.Time
	if limit > 0 {
		left := r.waitStart.Add(limit).Sub(now)
		if left <= 0 {
			return r.waitTimeout(limit)
		}
		r.deadlineT = r.armTimer(r.deadlineT, left)
		defer r.deadlineT.Stop()
		deadline = r.deadlineT.C
	}
	pollEvery := r.cfg.pollInterval
	if !r.waited {
		r.waited = true
		pollEvery = min(pollEvery, r.cfg.firstPoll)
	}
	r.pollT = r.armTimer(r.pollT, pollEvery)
	defer r.pollT.Stop()
	poll := r.pollT
	var beat <-chan time.Time
	if r.cfg.onHeartbeat != nil {
		// A heartbeat due already (its wait was cut by a poll, say) fires
		// at once.
		r.beatT = r.armTimer(r.beatT, r.nextBeat.Sub(now))
		defer r.beatT.Stop()
		beat = r.beatT.C
	}
	var hold <-chan time.Time
	if r.cfg.waits != nil && r.cfg.headHold > 0 && !r.gave && !r.held {
		if r.holdT == nil {
			r.holdT = r.armTimer(nil, r.cfg.headHold)
		}
		hold = r.holdT.C
	}
	idle := r.cfg.waits != nil
	for {
		if idle && len(r.live) == 0 {
			// Nothing more to take without blocking.
			idle = false
			if err := r.idle(); err != nil {
				return err
			}
		}
		select {
		case m := <-r.live:
			if !streams.ServerPublished(m) {
				// Not the stream's republish: a push consumer's
				// delivery (streams.ServerPublished).
				continue
			}
			if err := r.accept(headerUint(m, subjects.HeaderStreamSequence), m.Header, m.Data, true); err != nil {
				return err
			}
			if r.head < len(r.queue) || !r.caughtUp || r.done {
				return nil
			}
		case <-poll.C:
			r.caughtUp = false
			return nil
		case <-hold:
			r.held, hold = true, nil
			if err := r.cfg.waits.HeadHoldOver(); err != nil {
				return err
			}
		case <-beat:
			if err := r.cfg.onHeartbeat(); err != nil {
				return err
			}
			// The next one an interval after this one ran (a late one
			// does not bring the following ones forward).
			r.nextBeat = time.Now().Add(r.cfg.heartbeat)
			r.beatT.Reset(r.cfg.heartbeat)
		case <-deadline:
			return r.waitTimeout(limit)
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.lost() {
			return nil
		}
	}
}

// armTimer returns t (when nil, a timer a closed reader of the same
// service left, or a new one) set to fire after d. Since Go 1.23 a Reset
// timer never delivers a value from before the Reset, so reusing the
// timers of a reader across its waits, and those of closed readers for
// other readers, is safe.
func (r *Reader) armTimer(t *time.Timer, d time.Duration) *time.Timer {
	if t == nil {
		if r.cfg.timers != nil {
			if p, ok := r.cfg.timers.Get().(*time.Timer); ok {
				p.Reset(d)
				return p
			}
		}
		return time.NewTimer(d)
	}
	t.Reset(d)
	return t
}

// releaseTimer stops t (when not nil) and leaves it to the next reader of
// the same service; it returns nil, for the field that held it.
func (r *Reader) releaseTimer(t *time.Timer) *time.Timer {
	if t != nil {
		t.Stop()
		if r.cfg.timers != nil {
			r.cfg.timers.Put(t)
		}
	}
	return nil
}

func (r *Reader) waitTimeout(limit time.Duration) error {
	return fmt.Errorf("%w: request %q: waited %s", ErrWaitTimeout, r.requestID, limit)
}

// Replay reads the frames of requestID from sequence from to the final
// frame and calls fn with each, in order. It returns nil after the final
// frame, ErrNotFound for an unknown request, ErrWaitTimeout, the error of
// fn, or the context's error.
func Replay(ctx context.Context, nc *nats.Conn, requestID string, from int64, fn func(render.Frame) error, opts ...ReplayOption) error {
	r, err := Open(ctx, nc, requestID, from, opts...)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		f, err := r.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			return err
		}
	}
}

// requestExists reports whether E2A_REQUESTS holds an envelope for
// requestID, whatever its agent pool.
func requestExists(ctx context.Context, m *streams.DirectGetter, stream, requestID string) (bool, error) {
	msg, err := lookupRequest(ctx, m, stream, requestID)
	return msg != nil, err
}

func headerUint(m *nats.Msg, key string) uint64 {
	if m.Header == nil {
		return 0
	}
	n, _ := strconv.ParseUint(m.Header.Get(key), 10, 64)
	return n
}

func headerInt(h nats.Header, key string) (int64, bool) {
	if h == nil {
		return 0, false
	}
	v := h.Get(key)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// endedBefore reports whether the read has nothing to give, ever: its
// final frame lies before the resume point. It reads the stored frames as
// far as that takes (as Next would, without waiting), up to the first to
// give; an error of those reads is left for Next to return.
func (r *Reader) endedBefore(ctx context.Context) bool {
	for r.head == len(r.queue) && !r.done && !r.caughtUp {
		if r.fill(ctx) != nil {
			return false
		}
	}
	return r.done && r.head == len(r.queue)
}

// NextStored returns the next frame the stream holds now, without waiting
// for live frames: ok is false when there is none (yet, or after the final
// frame).
func (r *Reader) NextStored(ctx context.Context) (f render.Frame, ok bool, err error) {
	for {
		if r.head < len(r.queue) {
			f, err := r.Next(ctx)
			return f, err == nil, err
		}
		if r.done || r.caughtUp {
			return render.Frame{}, false, nil
		}
		if err := r.fill(ctx); err != nil {
			return render.Frame{}, false, err
		}
	}
}

// finalUpTo reports the final frame among those the reader read up to
// stream sequence upTo, before its first Next: one before the resume point
// (done) or one queued. known is false when it met none and has not read
// that far.
func (r *Reader) finalUpTo(upTo uint64) (f render.Frame, final, known bool) {
	if r.done {
		return r.ended, true, true
	}
	for _, q := range r.queue[r.head:] {
		if q.IsFinal() {
			return q, true, true
		}
	}
	return render.Frame{}, false, r.lastSeq >= upTo
}
