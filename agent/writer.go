package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/textproto"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Writer writes the ordered frames of one request. The runtime assigns
// sequence, response_id and timestamp, echoes the request's ids and sets
// provenance. Frames are published on the request's response subject, one
// message in flight at a time, fenced: with the previous message's stream
// sequence as the expected last subject sequence. The frames written while
// a message is in flight are stored together as the next message, a burst
// (e2a.SplitBurst; see the package documentation).
//
// A Writer is not safe for concurrent use: one goroutine (the handler's)
// writes. After the final frame every write returns ErrFinalWritten; once
// another worker owns the request every write returns an error wrapping
// ErrFenced and the handler's context is cancelled.
type Writer interface {
	// Chunk writes an e2a.chunk frame (status in_progress). Text and
	// reasoning deltas (strings) written while a frame is in flight are
	// coalesced into one frame (see WithCoalesce), so Chunk may return
	// before its frame is published; a later write reports its failure.
	// Any other Chunk (another delta, or text with coalescing off) returns
	// once its frame is stored, as Complete does. Sync waits for them all.
	// Text and reasoning deltas too large for one frame (the server's
	// max_payload) are split, on character boundaries, into several frames
	// that fit, in order: consumers concatenate deltas. Other deltas are
	// never split: one too large is refused with ErrFrameTooLarge.
	Chunk(deltaKind string, delta any) error
	// Complete writes the final e2a.complete frame {"result": result},
	// status succeeded.
	Complete(result any) error
	// Fail writes the final e2a.error frame, status failed.
	Fail(code, message string, retryable bool) error
	// Write writes a frame of any kind (acp.*, a2a.*, ext, or an e2a kind
	// without coalescing). body must encode as a JSON object; the frame is
	// validated (§12.2: a final frame is not in_progress, failed ⇔ error kind).
	// A non-final frame is not waited for: Write returns once it is queued
	// (published at once when nothing is in flight, else in the next burst),
	// a failure to store it is reported by a later write (the final one
	// waits until every frame before it and itself are stored), and a fence
	// cancels the handler's context at once. Write waits only while the
	// queue holds a full burst (max_payload, or maxBurstFrames frames).
	//
	// Every write refuses a frame larger than the server's max_payload
	// (headers included) with an error wrapping ErrFrameTooLarge, at once
	// and without publishing anything (Chunk splits text instead): the
	// writer stays usable, and a handler that returns the error ends the
	// request with a final e2a.error frame_too_large.
	Write(kind, status string, body any, final bool) error
	// SetMetadata sets the metadata object of the frames written after it
	// (nil or empty: none), e.g. {"llm_response_id": id}, with which the A2A
	// renderers group the events of one model response into one artifact.
	// Text still coalescing is written first, with the metadata it was
	// written under. m must encode as JSON; it is copied.
	SetMetadata(m map[string]any) error
	// ResumeAfter is -1 for a fresh request, and n when frames 0..n already
	// exist (a redelivery to a resumable handler): the next frame written is
	// n+1, and the handler must not repeat what frames 0..n hold.
	ResumeAfter() int64
	// Sync returns once every frame written before it is stored
	// (acknowledged by the stream), text still coalescing included, or
	// with the error that stopped one: an error wrapping ErrFenced (or the
	// writer's other failure) as the writes report it, ErrFinalWritten
	// after the final frame, ErrWriterClosed once the handler's context is
	// done, or the ErrFrameTooLarge of a coalesced delta refused. It costs
	// nothing when nothing is pending, else the wait for the message in
	// flight and the next one (a store round trip or two).
	//
	// A handler calls it before an action that leaves the process and must
	// not be repeated, so that a redelivery after a crash during that
	// action finds the frames announcing it (and, not being resumable,
	// ends with agent_interrupted rather than running it again). A Writer
	// that wraps another calls Sync on it; one that stores each frame
	// before its write returns (a test recorder) returns nil.
	Sync() error
}

// Holder is implemented by the runtime's Writer (and by wrappers that
// pass it on): Hold(true) keeps the coalesced text of Chunk from being
// published while a handler has more of its answer at hand (an upstream's
// bytes received and not yet read), so that an answer that arrives at once
// is stored as one message with its final frame instead of its first delta
// alone and then the rest (one store, PubAck, audit copy and delivery
// fewer). Hold(false) lets the text go at once (when nothing is in
// flight; with a WithCoalesce delay, once the text has waited that long:
// a delay that ran out during the hold does not publish held text). A
// handler must call Hold(false) before it waits for anything
// (the network, the upstream): held text waits with it. A final frame, a
// frame of another kind, Sync and a full coalescing bound take the text
// whatever the hold; the hold ends with the request. Call it through
// [Hold], which ignores a Writer that is not a Holder.
type Holder interface {
	Hold(on bool)
}

var _ Holder = (*writer)(nil)

// Hold calls w's Hold when w is a [Holder] (see there).
func Hold(w Writer, on bool) {
	if h, ok := w.(Holder); ok {
		h.Hold(on)
	}
}

// FrameBounder is implemented by the runtime's Writer (and by wrappers
// that pass it on): MaxFrameBytes is the largest message a frame can be
// stored as, the server's max_payload, headers included (0: unknown). A
// frame whose body alone is larger is refused with ErrFrameTooLarge
// (Chunk splits text instead), so a handler need not keep, for a final
// frame, what cannot fit one (the OpenAI bridge's answer text, which its
// final frame then omits). Call it through [MaxFrameBytes].
type FrameBounder interface {
	MaxFrameBytes() int64
}

var _ FrameBounder = (*writer)(nil)

// MaxFrameBytes is w's MaxFrameBytes when w is a [FrameBounder], else 0
// (unknown).
func MaxFrameBytes(w Writer) int64 {
	if b, ok := w.(FrameBounder); ok {
		return b.MaxFrameBytes()
	}
	return 0
}

// MaxFrameBytes implements FrameBounder.
func (wr *writer) MaxFrameBytes() int64 { return max(wr.maxPayload(), 0) }

// conflictRetries counts publishes refused while the subject was unchanged
// (a proposal on it still in process on a replicated stream), and retried.
var conflictRetries atomic.Int64

// frame is one frame to publish.
type frame struct {
	kind, status string
	body         any
	final        bool
	raw          bool // validate before publishing (Write)
	// tmpl, when set, replaces the writer's template (encoded without the
	// pre-encoded parts): the runtime's last-resort final frame
	// (finishBare).
	tmpl *e2a.Response
}

// pendingText is coalesced text (or reasoning) not yet published.
type pendingText struct {
	kind  string
	b     strings.Builder
	since time.Time
}

// writer is the Writer of one delivery of one request.
type writer struct {
	w         *worker
	requestID string
	subject   string
	tmpl      e2a.Response
	enc       frameEncoder // tmpl, pre-encoded
	trace     *e2a.TraceContext
	// spanCtx holds the delivery's span when tracing is on (nil when off):
	// the parent of each frame's publish span.
	spanCtx     context.Context
	resumeAfter int64
	// hctx is the handler's context: once it is done, handler writes are
	// refused.
	hctx context.Context
	// onFatal is called once when the writer can no longer publish (fenced,
	// connection lost), outside the lock.
	onFatal func(error)

	mu            sync.Mutex
	cond          *sync.Cond
	nextSeq       int64  // the sequence of the next frame to be stored
	lastStreamSeq uint64 // the stream sequence of the last message stored
	published     int    // frames this delivery published
	inflight      bool
	// The burst queue (burst.go): queued frames encoded and waiting, in
	// order, from sequence nextSeq+sending, joined by line feeds in
	// queueBuf (a burst's payload as built); queueFinal when the last is
	// final, with its status and error code. bursting while drain
	// publishes them (inflight is then set), sending the frames of its
	// message in flight, whose payload is sentBuf.
	queueBuf    []byte
	queued      int
	queueFinal  bool
	queueStatus string
	queueCode   string
	bursting    bool
	sending     int
	sentBuf     []byte
	hdrSize     int // headerSize, once computed
	pending     *pendingText
	flushNow    bool
	held        bool // Hold(true): pending text waits for a write or Hold(false)
	timer       *time.Timer
	closedErr   error // handler writes are refused with this error
	// tooLarge is the ErrFrameTooLarge of a coalesced frame published after
	// its Chunk returned: the next handler write reports it, and the
	// runtime's final frame becomes frame_too_large.
	tooLarge    error
	final       bool
	fatal       error
	finalStatus string
	finalCode   string

	// enqueuers counts the writes waiting in enqueue to queue a frame:
	// while one does, schedule leaves the pending text for it to queue
	// ahead of its frame (queuePendingLocked).
	enqueuers int

	// Publishing state, used by the goroutine publishing the frame in
	// flight (ordered by mu and inflight).
	msg         *nats.Msg
	hdr         [3]string // the values of msg's sequence, expected-last-sequence and frame count headers
	hdrExpected uint64    // the expected last sequence hdr[1] holds
	hdrFrames   int       // the frame count hdr[2] holds
	// frameBuf is the frame bytes' buffer, reused by the publish in flight
	// (see publish).
	frameBuf []byte
}

// maxFrameBuf bounds the frame buffer a writer keeps between frames.
const maxFrameBuf = 64 << 10

func newWriter(w *worker, env *e2a.Envelope, requestID, subject string, last *storedMsg, lastSeq int64) *writer {
	wr := &writer{
		w:           w,
		requestID:   requestID,
		subject:     subject,
		tmpl:        e2a.ResponseFor(env),
		trace:       env.Trace,
		resumeAfter: -1,
	}
	wr.tmpl.RequestID = requestID
	wr.tmpl.Provenance = e2a.Provenance{
		SourceProtocol: e2a.SourceE2A,
		Converter:      "agent",
		Details:        w.provenanceDetails(),
	}
	wr.enc = newFrameEncoder(&wr.tmpl)
	wr.cond = sync.NewCond(&wr.mu)
	if last != nil {
		wr.resumeAfter = lastSeq
		wr.nextSeq = lastSeq + 1
		wr.lastStreamSeq = last.seq
	}
	return wr
}

func (wr *writer) ResumeAfter() int64 { return wr.resumeAfter }

func (wr *writer) SetMetadata(m map[string]any) error {
	md, copied := copyStrings(m)
	if len(m) > 0 && !copied {
		b, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("agent: frame metadata does not encode as JSON: %w", err)
		}
		if err := json.Unmarshal(b, &md); err != nil {
			return fmt.Errorf("agent: frame metadata: %w", err)
		}
	}
	wr.mu.Lock()
	defer wr.mu.Unlock()
	// As enqueue: pending text goes first, and a text frame in flight
	// (encoded by its own goroutine with wr.enc) must be stored before the
	// encoder changes.
	for {
		if err := wr.writable(false); err != nil {
			return err
		}
		if wr.pending == nil && !(wr.inflight && !wr.bursting) {
			break
		}
		wr.flushNow = true
		wr.schedule()
		wr.cond.Wait()
	}
	wr.tmpl.Metadata = md
	wr.enc = newFrameEncoder(&wr.tmpl)
	return nil
}

// copyStrings is a copy of m when its keys and values are all strings of
// valid UTF-8 (a bridge's {"llm_response_id": id}): what the copy through
// JSON that SetMetadata makes of any other metadata would give, without
// it. False for anything else.
func copyStrings(m map[string]any) (map[string]any, bool) {
	if len(m) == 0 {
		return nil, false
	}
	for k, v := range m {
		s, ok := v.(string)
		if !ok || !utf8.ValidString(k) || !utf8.ValidString(s) {
			return nil, false
		}
	}
	return maps.Clone(m), true
}

// writable reports why the handler (or, with runtime, the runtime) may not
// write now. Lock held.
func (wr *writer) writable(runtime bool) error {
	switch {
	case wr.fatal != nil:
		return wr.fatal
	case wr.closedErr != nil && !runtime:
		return wr.closedErr
	case !runtime && wr.hctx != nil && wr.hctx.Err() != nil:
		// Cancelled, past the deadline, or shutting down: from the moment the
		// context is done the runtime owns the final frame.
		return ErrWriterClosed
	case wr.final:
		return ErrFinalWritten
	case wr.tooLarge != nil && !runtime:
		err := wr.tooLarge
		wr.tooLarge = nil
		return err
	}
	return nil
}

func (wr *writer) Chunk(deltaKind string, delta any) error {
	if err := checkDelta(deltaKind, delta); err != nil {
		return err
	}
	s, isText := delta.(string)
	text := isText && (deltaKind == e2a.DeltaText || deltaKind == e2a.DeltaReasoning)
	if text {
		if budget, capped := wr.textBudget(deltaKind, len(s)); capped {
			if budget < minTextBudget {
				return wr.tooLargeError(e2a.KindChunk, -1, wr.maxPayload())
			}
			if pieces := splitText(s, budget); len(pieces) > 1 {
				for _, piece := range pieces {
					if err := wr.chunk(deltaKind, piece); err != nil {
						return err
					}
				}
				return nil
			}
		}
	}
	if wr.w.cfg.coalesceBytes == 0 || !text {
		return wr.writeSync(frame{kind: e2a.KindChunk, status: e2a.StatusInProgress, body: e2a.ChunkBody{DeltaKind: deltaKind, Delta: delta}}, false)
	}
	return wr.chunk(deltaKind, s)
}

// chunk writes a text or reasoning delta that fits in one frame, coalesced
// with the pending one while their sum stays within the coalescing bound
// and, with a small max_payload, within what one frame can hold.
func (wr *writer) chunk(deltaKind, s string) error {
	if wr.w.cfg.coalesceBytes == 0 {
		return wr.writeSync(frame{kind: e2a.KindChunk, status: e2a.StatusInProgress, body: e2a.ChunkBody{DeltaKind: deltaKind, Delta: s}}, false)
	}
	bound := wr.w.cfg.coalesceBytes
	if budget, capped := wr.textBudget(deltaKind, bound); capped {
		// Any text of budget/maxEscape bytes fits once escaped.
		bound = min(bound, max(budget/maxEscape, 1))
	}
	wr.mu.Lock()
	defer wr.mu.Unlock()
	for {
		if err := wr.writable(false); err != nil {
			return err
		}
		p := wr.pending
		if p == nil || (p.kind == deltaKind && p.b.Len()+len(s) <= bound) {
			break
		}
		// Another kind, or full: wait until the pending frame is taken.
		wr.flushNow = true
		wr.schedule()
		wr.cond.Wait()
	}
	if wr.pending == nil {
		wr.pending = &pendingText{kind: deltaKind, since: time.Now()}
	}
	wr.pending.b.WriteString(s)
	wr.schedule()
	return nil
}

func (wr *writer) Complete(result any) error {
	return wr.writeSync(frame{kind: e2a.KindComplete, status: e2a.StatusSucceeded, body: e2a.CompleteBody{Result: result}, final: true}, false)
}

func (wr *writer) Fail(code, message string, retryable bool) error {
	if code == "" {
		code = e2a.ErrCodeHandlerError
	}
	if message == "" {
		message = code
	}
	return wr.writeSync(errorFrame(code, message, retryable, nil), false)
}

func errorFrame(code, message string, retryable bool, details map[string]any) frame {
	return frame{kind: e2a.KindError, status: e2a.StatusFailed, final: true,
		body: e2a.ErrorBody{Code: code, Message: message, Retryable: retryable, Details: details}}
}

func (wr *writer) Write(kind, status string, body any, final bool) error {
	return wr.writeSync(frame{kind: kind, status: status, body: body, final: final, raw: true}, false)
}

// writeSync queues f after everything pending (see enqueue) and, unless f
// is a non-final frame of Write, waits until it is stored. With runtime set
// it ignores closedErr (the runtime's own final frame).
func (wr *writer) writeSync(f frame, runtime bool) error {
	seq, err := wr.enqueue(f, runtime)
	if err != nil || (f.raw && !f.final) {
		return err
	}
	return wr.stored(seq)
}

// publishAlone publishes f on its own, expecting the message before it.
func (wr *writer) publishAlone(seq int64, f frame) (uint64, error) {
	wr.mu.Lock()
	expected := wr.lastStreamSeq
	wr.mu.Unlock()
	return wr.publish(seq, expected, f)
}

// schedule starts publishing the pending text when nothing is in flight and
// it has waited long enough (or is full, or a flush is asked). Lock held.
func (wr *writer) schedule() {
	p := wr.pending
	if wr.inflight || p == nil || wr.fatal != nil || wr.queued > 0 || wr.enqueuers > 0 {
		return
	}
	cfg := &wr.w.cfg
	if wr.held && !wr.flushNow && p.b.Len() < cfg.coalesceBytes {
		return // the handler has more at hand (Hold)
	}
	if !wr.flushNow && cfg.coalesceDelay > 0 && p.b.Len() < cfg.coalesceBytes {
		if wait := cfg.coalesceDelay - time.Since(p.since); wait > 0 {
			if wr.timer == nil {
				var t *time.Timer
				t = time.AfterFunc(wait, func() {
					wr.mu.Lock()
					defer wr.mu.Unlock()
					// A timer stopped after it fired (the text it waited
					// for was taken) is not the writer's any more: its
					// flushNow would publish later text before its delay,
					// or while it is held. Text held when the timer fires
					// waits for Hold(false), which schedules it again.
					if wr.timer != t {
						return
					}
					wr.timer = nil
					if wr.held {
						return
					}
					wr.flushNow = true
					wr.schedule()
				})
				wr.timer = t
			}
			return
		}
	}
	if wr.timer != nil {
		wr.timer.Stop()
		wr.timer = nil
	}
	wr.pending, wr.flushNow, wr.inflight = nil, false, true
	seq := wr.nextSeq
	f := frame{kind: e2a.KindChunk, status: e2a.StatusInProgress, body: e2a.ChunkBody{DeltaKind: p.kind, Delta: p.b.String()}}
	go func() {
		if wr.w.cfg.beforeBurst != nil {
			wr.w.cfg.beforeBurst(wr.requestID, seq, 1)
		}
		streamSeq, err := wr.publishAlone(seq, f)
		if errors.Is(err, ErrFrameTooLarge) {
			// Its Chunk has returned: the next write reports it.
			wr.mu.Lock()
			if wr.tooLarge == nil {
				wr.tooLarge = err
			}
			wr.mu.Unlock()
		}
		wr.done(f, streamSeq, err)
	}()
}

// Hold implements Holder.
func (wr *writer) Hold(on bool) {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	if wr.held == on {
		return
	}
	wr.held = on
	if !on {
		wr.schedule()
	}
}

// done records the outcome of the coalesced text frame in flight.
func (wr *writer) done(f frame, streamSeq uint64, err error) {
	wr.mu.Lock()
	if err == nil {
		wr.nextSeq++
		wr.lastStreamSeq = streamSeq
		wr.published++
	}
	wr.endTurnLocked(err)
}

// endTurnLocked ends the publishing turn (inflight): err, unless nil or a
// frame's own error, becomes the writer's failure; waiters wake, and the
// queued frames are drained or else the pending text is scheduled. It
// unlocks wr.mu, then tells onFatal of a new failure.
func (wr *writer) endTurnLocked(err error) {
	wr.inflight = false
	notify := err != nil && wr.fatal == nil && !isFrameError(err)
	if notify {
		wr.fatal = err
		wr.pending = nil
	}
	if wr.fatal != nil {
		wr.dropQueueLocked()
	}
	if wr.queued > 0 {
		wr.startDrainLocked()
	}
	wr.schedule()
	wr.cond.Broadcast()
	wr.mu.Unlock()
	if notify && wr.onFatal != nil {
		wr.onFatal(err)
	}
}

// Sync implements Writer.Sync: the pending text is published at once, then it
// waits, as flush does, until nothing is pending, queued or in flight.
func (wr *writer) Sync() error {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	for waited := false; ; waited = true {
		if err := wr.writable(false); err != nil {
			return err
		}
		if wr.pending == nil && !wr.inflight && wr.queued == 0 {
			return nil
		}
		wr.flushNow = true
		wr.schedule()
		// Sync waits behind the message in flight as a write does (tests
		// release that message only then).
		if hook := wr.w.cfg.enqueueWait; hook != nil && !waited {
			hook(wr.requestID)
		}
		wr.cond.Wait()
	}
}

// flush waits until every pending delta is published (or failed).
func (wr *writer) flush() error {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	for (wr.pending != nil || wr.inflight || wr.queued > 0) && wr.fatal == nil {
		wr.flushNow = true
		wr.schedule()
		wr.cond.Wait()
	}
	return wr.fatal
}

// close refuses further handler writes with err and waits for the frame in
// flight. Pending deltas are kept for a later finish to publish, unless drop
// (the request is handed back: its next owner writes from the last frame
// stored, and nothing may follow our hand-back).
func (wr *writer) close(err error, drop bool) {
	wr.mu.Lock()
	if wr.closedErr == nil {
		wr.closedErr = err
	}
	if drop {
		// Handed back: the frames not yet sent are not (the next delivery
		// writes from the last frame stored); the message in flight is
		// waited for.
		wr.pending = nil
		if wr.timer != nil {
			wr.timer.Stop()
			wr.timer = nil
		}
		wr.dropQueueLocked()
	}
	for wr.inflight {
		wr.cond.Wait()
	}
	wr.cond.Broadcast()
	wr.mu.Unlock()
}

// finish writes the runtime's final frame f unless a final frame exists.
// It reports whether f was written. When f itself is too large, or a
// coalesced delta was refused as too large and never reported to the
// handler, the final frame is e2a.error frame_too_large instead: the
// request ends at once rather than being redelivered. When that cannot be
// written either (finishBare) a bare frame replaces it: a frame refused
// before publishing would be refused again at every redelivery.
func (wr *writer) finish(f frame) (bool, error) {
	if err := wr.flush(); err != nil {
		return false, err
	}
	wr.mu.Lock()
	final, lost := wr.final, wr.tooLarge
	wr.tooLarge = nil
	wr.mu.Unlock()
	if final {
		return false, nil
	}
	if lost != nil {
		f = tooLargeFrame(lost)
	}
	err := wr.writeFinal(f)
	if isFrameError(err) {
		err = wr.finishBare(f, err)
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// writeFinal writes the runtime's final frame f, or e2a.error
// frame_too_large when f is too large.
func (wr *writer) writeFinal(f frame) error {
	err := wr.writeSync(f, true)
	if errors.Is(err, ErrFrameTooLarge) {
		tl := tooLargeFrame(err)
		tl.tmpl = f.tmpl
		err = wr.writeSync(tl, true)
	}
	return err
}

// finishBare writes the final frame of a request whose runtime final frame
// f was refused before publishing (err, a frameError): its details do not
// encode as JSON (a handler's *Error holding NaN), or every frame of the
// request is over max_payload (echoed ids that grow when encoded: '<' is
// written \u003c). It writes f without its details (an e2a.error keeps its
// code, message and retryable), then, if that is refused too, the same on
// a template that keeps, of the request's ids, only its request id
// (echoless).
func (wr *writer) finishBare(f frame, err error) error {
	log := wr.w.log.With("request_id", wr.requestID)
	log.Warn("the final frame cannot be written: writing it without its details", "err", err)
	f = bareFrame(f)
	if err = wr.writeFinal(f); !isFrameError(err) {
		return err
	}
	log.Warn("the final frame cannot be written: writing it without the echoed ids", "err", err)
	wr.mu.Lock() // SetMetadata writes the template under it
	f.tmpl = echoless(&wr.tmpl)
	wr.mu.Unlock()
	return wr.writeFinal(f)
}

// bareFrame is f without the details of an e2a.error (its message
// bounded); any other frame as is.
func bareFrame(f frame) frame {
	b, ok := f.body.(e2a.ErrorBody)
	if !ok {
		return f
	}
	return errorFrame(b.Code, boundMessage(b.Message), b.Retryable, nil)
}

// echoless is tmpl with, of the request's ids and context, only the
// request id: protocol version (its default when long), request id,
// is_stream, identity origin and provenance.
func echoless(tmpl *e2a.Response) *e2a.Response {
	v := tmpl.ProtocolVersion
	if len(v) > len(e2a.ProtocolVersion)+16 {
		v = e2a.ProtocolVersion
	}
	return &e2a.Response{ProtocolVersion: v, RequestID: tmpl.RequestID, IsStream: tmpl.IsStream,
		IdentityOrigin: tmpl.IdentityOrigin, Provenance: tmpl.Provenance}
}

// tooLargeFrame is the final e2a.error frame_too_large for err.
func tooLargeFrame(err error) frame {
	return errorFrame(e2a.ErrCodeFrameTooLarge, err.Error(), false, nil)
}

// afterEviction readies the writer, failed with an evictedError, for the
// runtime's final frame: as the frame after the last one stored, on the
// response subject the stream emptied (expected last subject sequence 0).
// Handler writes stay refused (closedErr is set by then).
func (wr *writer) afterEviction() {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	for wr.inflight {
		wr.cond.Wait()
	}
	var ee *evictedError
	if errors.As(wr.fatal, &ee) {
		wr.fatal = nil
		wr.lastStreamSeq = 0
	}
}

// evictedFrame is the final e2a.error frames_evicted of a request whose
// stored frames the stream dropped before frame ee.seq.
func evictedFrame(ee *evictedError) frame {
	return errorFrame(e2a.ErrCodeFramesEvicted, fmt.Sprintf("the stream dropped this request's earlier frames "+
		"(its limits: E2A_RESPONSES_MAX_BYTES) before the answer was complete; frames 0..%d were sent and the "+
		"answer cannot go on: retry the request", ee.seq-1), true, nil)
}

func (wr *writer) state() (final bool, status, code string, fatal error, published int) {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	return wr.final, wr.finalStatus, wr.finalCode, wr.fatal, wr.published
}

// frameError is a frame refused before publishing (bad kind, status, body):
// the handler's mistake, not fatal to the request.
type frameError struct{ err error }

func (e *frameError) Error() string { return e.err.Error() }
func (e *frameError) Unwrap() error { return e.err }

func isFrameError(err error) bool {
	var fe *frameError
	return errors.As(err, &fe)
}

// encode builds the frame's JSON: the variable fields appended to the
// request's constant part, encoded once (see frameEncoder).
func (wr *writer) encode(seq int64, f frame) ([]byte, error) { return wr.encodeTo(nil, seq, f) }

// encodeTo is encode into dst's array when it has room (dst's contents are
// dropped).
func (wr *writer) encodeTo(dst []byte, seq int64, f frame) ([]byte, error) {
	return wr.appendFrame(dst[:0], seq, f)
}

// appendFrame appends the frame's JSON to dst (see encode). On an error dst
// is returned unchanged in length.
func (wr *writer) appendFrame(dst []byte, seq int64, f frame) ([]byte, error) {
	// A chunk whose delta is a string (text, reasoning) is appended in place
	// by the pre-encoded path; other bodies go through json.Marshal.
	cb, isChunk := f.body.(e2a.ChunkBody)
	delta, isText := cb.Delta.(string)
	inPlace := isChunk && isText && wr.enc.ok
	var body []byte
	switch {
	case inPlace:
	case isChunk && isText:
		body = appendChunkBody(nil, &cb, delta)
	default:
		var err error
		body, err = wr.marshalBody(f.body)
		if err != nil {
			return nil, &frameError{fmt.Errorf("agent: frame body does not encode as JSON: %w", err)}
		}
		if len(body) == 0 || body[0] != '{' {
			return nil, &frameError{fmt.Errorf("agent: frame body must be a JSON object")}
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	reflective := !wr.enc.ok || f.tmpl != nil // json.Marshal of the whole frame
	if f.raw || reflective {
		r := wr.tmpl
		if f.tmpl != nil {
			r = *f.tmpl
		}
		r.Sequence = seq
		r.IsFinal = f.final
		r.Status = f.status
		r.ResponseKind = f.kind
		r.Body = body
		// The members a full validation (or the reflective encoding) needs
		// beyond those: the typed bodies of Write are checked without them.
		complete := func() {
			r.ResponseID = id.String()
			r.Timestamp = e2a.FormatTime(now)
			if r.Body == nil && inPlace {
				r.Body = appendChunkBody(nil, &cb, delta)
			}
		}
		if f.raw {
			if err := checkRaw(&r, f.body, complete); err != nil {
				return nil, &frameError{err}
			}
		}
		if reflective {
			complete()
			m := r // r itself stays on the stack
			b, err := e2a.MarshalResponse(&m)
			if err != nil {
				return dst, err
			}
			return append(dst, b...), nil
		}
	}
	n := wr.enc.size() + len(f.status) + len(f.kind) + e2a.TimeLen + len(body)
	if inPlace {
		n += 40 + len(cb.DeltaKind) + len(cb.MimeType) + len(delta) + len(delta)/8
	}
	out := wr.enc.appendHead(slices.Grow(dst, n), id, seq, f.final, f.status, f.kind, now)
	if inPlace {
		out = appendChunkBody(out, &cb, delta)
	} else {
		out = append(out, body...)
	}
	return append(out, wr.enc.end...), nil
}

// marshalBody encodes a frame's body. A body whose encoding panics (a
// MarshalJSON of the handler's, in a delta, a Write body or an *Error's
// Details) is refused as one that does not encode, the panic logged with
// its stack: it ran under the writer's lock, in the middle of queueing a
// burst, and unwound through it (text queued with nothing to publish it:
// a request that never ended), or on the delivery's goroutine for the
// runtime's final frame (the process died).
func (wr *writer) marshalBody(body any) (b []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			if l := wr.w.log; l != nil {
				l.Error("a frame body's JSON encoding panicked: frame refused", "request_id", wr.requestID,
					"panic", v, "stack", string(debug.Stack()))
			}
			b, err = nil, fmt.Errorf("its encoding panicked: %v", v)
		}
	}()
	return json.Marshal(body)
}

// checkDelta checks a Chunk's delta against §12.5: delta_kind one of
// text, reasoning, tool, custom; the delta a string or a structured
// object (a struct, a map). A typo ("Text") was published as a kind no
// client reads as text, a number or nil as a delta no client reads.
func checkDelta(deltaKind string, delta any) error {
	switch deltaKind {
	case e2a.DeltaText, e2a.DeltaReasoning, e2a.DeltaTool, e2a.DeltaCustom:
	case "":
		return fmt.Errorf("%w: Chunk needs a delta kind", e2a.ErrInvalidResponse)
	default:
		return fmt.Errorf("%w: delta_kind %q is not one of text, reasoning, tool, custom", e2a.ErrInvalidResponse, deltaKind)
	}
	switch delta.(type) {
	case string:
		return nil
	case json.Number: // a number, as a decoder using numbers reads one
		return fmt.Errorf("%w: a chunk's delta is a string or an object, not a number", e2a.ErrInvalidResponse)
	}
	if delta == nil {
		return fmt.Errorf("%w: a %s chunk needs a delta", e2a.ErrInvalidResponse, deltaKind)
	}
	if raw, ok := delta.(json.RawMessage); ok {
		if t := bytes.TrimSpace(raw); len(t) > 0 && (t[0] == '{' || t[0] == '"') {
			return nil
		}
		return fmt.Errorf("%w: a chunk's delta is a string or an object, not %.20s", e2a.ErrInvalidResponse, raw)
	}
	// A nil map (or a pointer to one) encodes as null: no delta.
	switch v := reflect.ValueOf(delta); v.Kind() {
	case reflect.String, reflect.Struct:
		return nil
	case reflect.Map:
		if !v.IsNil() {
			return nil
		}
	case reflect.Pointer:
		if !v.IsNil() && (v.Elem().Kind() == reflect.Struct || v.Elem().Kind() == reflect.Map && !v.Elem().IsNil()) {
			return nil
		}
	}
	return fmt.Errorf("%w: a chunk's delta is a string or an object, not %T", e2a.ErrInvalidResponse, delta)
}

// checkRaw validates a frame of Write: the §12.2 rules on kind, status and
// is_final, and the body; typed bodies are checked without decoding them
// again. complete (when not nil) fills in the members of r the full
// validation needs that the typed checks do not (response id, timestamp,
// body bytes): they are built only when needed.
func checkRaw(r *e2a.Response, body any, complete func()) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", e2a.ErrInvalidResponse, fmt.Sprintf(format, a...))
	}
	validate := func() error {
		if complete != nil {
			complete()
		}
		if err := r.Validate(); err != nil {
			return err
		}
		if r.ResponseKind == e2a.KindChunk {
			// §12.5's delta rules, which Validate (lenient on what it
			// reads) leaves out: a raw chunk body (the HTTP agent
			// bridge's) as Chunk's arguments.
			if c, err := r.Chunk(); err == nil {
				return checkDelta(c.DeltaKind, c.Delta)
			}
		}
		return nil
	}
	switch b := body.(type) {
	case e2a.ChunkBody:
		if r.ResponseKind == e2a.KindChunk {
			if err := checkDelta(b.DeltaKind, b.Delta); err != nil {
				return err
			}
		}
	case *e2a.ChunkBody, e2a.ErrorBody, *e2a.ErrorBody, e2a.StreamEventBody, *e2a.StreamEventBody:
		return validate()
	case e2a.CompleteBody, *e2a.CompleteBody, e2a.ExtBody, *e2a.ExtBody:
	default:
		return validate()
	}
	switch {
	case !e2a.IsResponseKind(r.ResponseKind):
		return bad("response_kind %q is unknown", r.ResponseKind)
	case !e2a.IsStatus(r.Status):
		return bad("status %q is not one of succeeded, failed, in_progress", r.Status)
	case r.Status == e2a.StatusFailed && r.ResponseKind != e2a.KindError && r.ResponseKind != e2a.KindACPJSONRPCErr:
		return bad("status failed requires response_kind e2a.error, got %q", r.ResponseKind)
	case r.ResponseKind == e2a.KindError && r.Status != e2a.StatusFailed:
		return bad("e2a.error requires status failed, got %q", r.Status)
	case r.IsFinal == (r.Status == e2a.StatusInProgress):
		return bad("is_final %v with status %q", r.IsFinal, r.Status)
	case r.ResponseKind == e2a.KindChunk && body != nil && !isChunkBody(body):
		return validate()
	case !typedBodyOf(r.ResponseKind, body):
		// A typed body of another kind (a CompleteBody on an e2a.error,
		// an ExtBody on a2a.stream_event): the whole check, which the
		// typed ones skip (it stored a final e2a.error without code and
		// message).
		return validate()
	}
	return nil
}

// typedBodyOf reports whether body, a ChunkBody, CompleteBody or ExtBody
// (a pointer to one too), is the body of a frame of kind: e2a.chunk's,
// e2a.complete's, ext's.
func typedBodyOf(kind string, body any) bool {
	switch body.(type) {
	case e2a.ChunkBody:
		return kind == e2a.KindChunk
	case e2a.CompleteBody, *e2a.CompleteBody:
		return kind == e2a.KindComplete
	case e2a.ExtBody, *e2a.ExtBody:
		return kind == e2a.KindExt
	}
	return true
}

func isChunkBody(b any) bool {
	_, ok := b.(e2a.ChunkBody)
	return ok
}

// publish writes frame seq with the expected last subject sequence and
// returns its stream sequence. It retries transient failures with the same
// bytes for up to the publish timeout, and tells a retry that landed (the
// subject's last frame is byte for byte ours) from a frame written by
// another worker.
func (wr *writer) publish(seq int64, expected uint64, f frame) (uint64, error) {
	// Only the publish in flight (one at a time) uses the buffer; nats.go
	// copies what it sends, so the next frame reuses it.
	data, err := wr.encodeTo(wr.frameBuf, seq, f)
	wr.frameBuf = nil
	if err != nil {
		return 0, err
	}
	defer func() {
		if cap(data) <= maxFrameBuf {
			wr.frameBuf = data[:0]
		}
	}()
	// A frame over max_payload would be refused at every attempt until the
	// request is redelivered to its end: refuse it now.
	if limit := wr.maxPayload(); limit > 0 {
		m := wr.message(seq, 1, data)
		wr.expect(m, expected)
		if size := streams.MessageSize(m); size > limit {
			return 0, wr.tooLargeError(f.kind, size, limit)
		}
	}
	return wr.publishData(seq, 1, expected, data)
}

// maxPayload is the max_payload of the server the connection is on (0:
// unknown); nats.go learns it again at each reconnect.
func (wr *writer) maxPayload() int64 { return wr.w.js.Conn().MaxPayload() }

// tooLargeError is the refusal of a frame of kind, size bytes (-1: even
// an empty one), over the server's max_payload limit, said in the log
// with its request: the client's frame_too_large (or the handler's own
// handling of the error) names no worker.
func (wr *writer) tooLargeError(kind string, size, limit int64) error {
	wr.w.log.Warn("frame refused: larger than the NATS server's max_payload", "request_id", wr.requestID,
		"kind", kind, "bytes", size, "max_payload", limit)
	return &frameError{&frameTooLargeError{kind: kind, size: size, limit: limit}}
}

// frameTooLargeError is ErrFrameTooLarge with the sizes; as an *Error it is
// the e2a.error frame_too_large a handler returning it ends with.
type frameTooLargeError struct {
	kind        string
	size, limit int64 // size -1: even an empty frame does not fit
}

func (e *frameTooLargeError) Error() string {
	if e.size < 0 {
		return fmt.Sprintf("%v: even an empty %s frame of this request exceeds %d bytes", ErrFrameTooLarge, e.kind, e.limit)
	}
	return fmt.Sprintf("%v: %s frame of %d bytes with its headers; the NATS server takes at most %d", ErrFrameTooLarge, e.kind, e.size, e.limit)
}

func (e *frameTooLargeError) Is(target error) bool { return target == ErrFrameTooLarge }

func (e *frameTooLargeError) As(target any) bool {
	if p, ok := target.(**Error); ok {
		*p = &Error{Code: e2a.ErrCodeFrameTooLarge, Message: e.Error()}
		return true
	}
	return false
}

// maxEscape is the most bytes one byte of text takes in a JSON string
// (a control character or <, >, & as \u00XX).
const maxEscape = 6

// minTextBudget is the least room for a delta worth splitting into.
const minTextBudget = 64

// textSlack covers what varies between two chunk frames of a request
// beyond the delta: the timestamp's fractional digits.
const textSlack = 64

// textBudget returns how many bytes of JSON-escaped delta (quotes
// excluded) a deltaKind chunk can hold within max_payload, and capped
// false when n bytes of any text fit anyway (the common case, decided
// without encoding anything).
func (wr *writer) textBudget(deltaKind string, n int) (int, bool) {
	limit := wr.maxPayload()
	// n ≤ room/maxEscape, not n*maxEscape ≤ room: a bound as large as
	// math.MaxInt (WithCoalesce) overflowed the product and fit.
	if room := limit - int64(wr.enc.size()) - wr.cheapHeaderBound() - textSlack; limit <= 0 || room >= 0 && int64(n) <= room/maxEscape {
		return 0, false
	}
	empty, err := wr.encode(math.MaxInt64, frame{kind: e2a.KindChunk, status: e2a.StatusInProgress, body: e2a.ChunkBody{DeltaKind: deltaKind, Delta: ""}})
	if err != nil {
		return 0, true
	}
	over := int64(len(empty)-2) + int64(wr.headerBound()) + textSlack
	return int(max(limit-over, 0)), true
}

// cheapHeaderBound bounds headerBound without building headers: the
// request id in two headers (three times, for an escaped message id), the
// trace context, and 320 bytes of names, sequences, counts and framing.
func (wr *writer) cheapHeaderBound() int64 {
	n := 3*len(wr.requestID) + 320
	if wr.trace != nil {
		n += len(wr.trace.Traceparent) + len(wr.trace.Tracestate)
	}
	return int64(n)
}

// headerBound is the size of a frame's headers at their longest (largest
// sequences), as nats.go encodes them (streams.MessageSize of a message
// of those headers and nothing else), counted without building them
// (they were 7 allocations per request): the header line and the blank
// line that ends them, and per header its name, ": ", its value (as
// nats.go trims it) and CRLF.
func (wr *writer) headerBound() int {
	n := len("NATS/1.0\r\n") + len("\r\n")
	add := func(name, value string) { n += len(name) + len(": ") + len(textproto.TrimString(value)) + len("\r\n") }
	if headerSafe(wr.requestID) {
		add(subjects.HeaderRequestID, wr.requestID)
	}
	if wr.trace != nil {
		if headerSafe(wr.trace.Traceparent) {
			add(subjects.HeaderTraceparent, wr.trace.Traceparent)
		}
		if headerSafe(wr.trace.Tracestate) {
			add(subjects.HeaderTracestate, wr.trace.Tracestate)
		}
	}
	add(subjects.HeaderSequence, maxSequenceText)
	add(jetstream.ExpectedLastSubjSeqHeader, maxStreamSeqText)
	add(subjects.HeaderFrames, maxBurstFramesText) // a burst's
	return n
}

// The longest values of a frame's sequence, expected last sequence and
// frame count headers.
var (
	maxSequenceText    = strconv.FormatInt(math.MaxInt64, 10)
	maxStreamSeqText   = strconv.FormatUint(math.MaxUint64, 10)
	maxBurstFramesText = strconv.Itoa(e2a.MaxBurstFrames)
)

// splitText cuts s, on character boundaries, into pieces whose JSON string
// encodings (as appendJSONString writes them, quotes excluded) are at most
// budget bytes each (budget ≥ maxEscape).
func splitText(s string, budget int) []string {
	var pieces []string
	start, esc := 0, 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		e := size
		switch {
		case r == utf8.RuneError && size == 1:
			e = len(`\ufffd`)
		case r < utf8.RuneSelf:
			e = jsonByteLen(byte(r))
		case r == '\u2028' || r == '\u2029':
			e = maxEscape
		}
		if esc+e > budget && i > start {
			pieces = append(pieces, s[start:i])
			start, esc = i, 0
		}
		esc += e
		i += size
	}
	return append(pieces, s[start:])
}

// jsonByteLen is the length of ASCII byte c in a JSON string.
func jsonByteLen(c byte) int {
	switch {
	case c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&':
		return 1
	case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
		return 2
	}
	return maxEscape
}

// maxAttempt bounds one publish attempt.
const maxAttempt = 2 * time.Second

// message returns the writer's message for frame seq, carrying data: one
// frame, or a burst of n frames from seq (n > 1: its E2A-Frames header).
// The headers fixed for the request (request id, trace context) are set
// once; the message is reused message after message, which is safe as one
// message at a time is in flight and streams.Publish does not keep it.
func (wr *writer) message(seq int64, n int, data []byte) *nats.Msg {
	m := wr.msg
	if m == nil {
		m = nats.NewMsg(wr.subject)
		if headerSafe(wr.requestID) {
			m.Header.Set(subjects.HeaderRequestID, wr.requestID)
		}
		if wr.trace != nil {
			if headerSafe(wr.trace.Traceparent) {
				m.Header.Set(subjects.HeaderTraceparent, wr.trace.Traceparent)
			}
			if headerSafe(wr.trace.Tracestate) {
				m.Header.Set(subjects.HeaderTracestate, wr.trace.Tracestate)
			}
		}
		wr.msg = m
	}
	m.Data = data
	// The header values are written into slices the writer owns (nats.go's
	// Header.Set would allocate one per frame).
	wr.hdr[0] = strconv.FormatInt(seq, 10)
	m.Header[subjects.HeaderSequence] = wr.hdr[0:1:1]
	if n > 1 {
		if wr.hdrFrames != n {
			wr.hdr[2], wr.hdrFrames = strconv.Itoa(n), n
		}
		m.Header[subjects.HeaderFrames] = wr.hdr[2:3:3]
	} else {
		delete(m.Header, subjects.HeaderFrames)
	}
	return m
}

// expect sets the message's expected last subject sequence: what
// jetstream.WithExpectLastSequencePerSubject writes, without an option
// closure and header slice per frame.
func (wr *writer) expect(m *nats.Msg, expected uint64) {
	if wr.hdr[1] == "" || wr.hdrExpected != expected {
		wr.hdr[1], wr.hdrExpected = strconv.FormatUint(expected, 10), expected
	}
	m.Header[jetstream.ExpectedLastSubjSeqHeader] = wr.hdr[1:2:2]
}

// publishData publishes data, the encoded frame seq or the burst of n
// frames from seq (see publish).
func (wr *writer) publishData(seq int64, n int, expected uint64, data []byte) (streamSeq uint64, err error) {
	m := wr.message(seq, n, data)
	wr.expect(m, expected)
	if wr.spanCtx != nil {
		span := wr.frameSpan(m.Header, seq)
		defer func() { endFrameSpan(span, streamSeq, err) }()
	}
	js := wr.w.js
	deadline := time.Now().Add(wr.w.cfg.publishTimeout)
	backoff := 5 * time.Millisecond
	retry := func(cause error) error {
		if time.Now().Add(backoff).After(deadline) {
			return fmt.Errorf("agent: frame %d of %q not written within %v: %w", seq, wr.requestID, wr.w.cfg.publishTimeout, cause)
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 500*time.Millisecond)
		return nil
	}
	for {
		ack, err := streams.PublishWithin(js.Conn(), m, max(min(time.Until(deadline), maxAttempt), time.Millisecond))
		if err == nil {
			wr.w.metrics.frames.WithLabelValues(wr.w.pool).Add(float64(n))
			return ack.Seq, nil
		}
		switch {
		case isWrongLastSeq(err):
			ctx, cancel := context.WithTimeout(context.Background(), max(min(time.Until(deadline), maxAttempt), time.Millisecond))
			last, gerr := leaderLastMsg(ctx, js, wr.w.streams.Responses, wr.subject)
			cancel()
			if gerr != nil {
				err = gerr
				break
			}
			if last != nil && bytes.Equal(last.data, data) {
				return last.seq, nil // an earlier attempt landed
			}
			if (last == nil && expected == 0) || (last != nil && last.seq == expected) {
				conflictRetries.Add(1)
				break // nothing changed: a concurrent proposal, or a stale read; retry
			}
			if last == nil {
				// Our frames were stored (expected != 0) and none is left:
				// the stream dropped them (its limits), as another worker
				// would have left its own. Not a fence: the runtime ends the
				// request (frames_evicted) rather than have it redelivered
				// and run again from its start.
				return 0, &evictedError{seq: seq}
			}
			return 0, wr.fenced(last)
		}
		if isClosed(err) {
			return 0, err
		}
		if rerr := retry(err); rerr != nil {
			return 0, rerr
		}
	}
}

func (wr *writer) fenced(found *storedMsg) error {
	h, err := found.frame()
	if err != nil {
		return &fencedError{lastSeq: -1}
	}
	return &fencedError{lastSeq: h.Sequence, lastFinal: h.IsFinal}
}
