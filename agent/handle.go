package agent

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/tracing"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// One delivery's life, in phases (handle): pick up (pickUp: decode, the
// request id, the response subject), resume (resume: what the response
// subject already holds), start (the writer and the handler's context),
// the checks before the handler (refusal: invalid, cancelled at pick-up,
// past its deadline, partial and not resumable), the wait for the previous
// turn (awaitTurn, turns.go), run (runHandler: the handler with its writer)
// and settle (stopped, end, settle: the outcome, ack, nak or term).

// maxErrorMessage bounds the message of a handler_error frame, taken from
// the handler's error.
const maxErrorMessage = 1024

// boundMessage is msg cut to maxErrorMessage bytes, "…" marking a cut.
// The cut is on a character boundary: one inside a character left a
// replacement character (U+FFFD) in the frame.
func boundMessage(msg string) string {
	if len(msg) > maxErrorMessage {
		n := maxErrorMessage
		for n > 0 && !utf8.RuneStart(msg[n]) {
			n--
		}
		return msg[:n] + "…"
	}
	return msg
}

// ioTimeout bounds the reads of the pick-up.
const ioTimeout = 5 * time.Second

// delivery is what the phases of handle know of one delivery.
type delivery struct {
	m        jetstream.Msg
	meta     *jetstream.MsgMetadata
	env      *e2a.Envelope // never nil; its RequestID is id
	perr     error         // the envelope's decoding error, answered before the handler
	id       string
	respSubj string
	log      *reqLogger
	spanCtx  context.Context // the delivery's span (context.Background without tracing)

	last    *storedMsg // the last stored message of a redelivery, if any
	lastSeq int64      // the sequence of its last frame; -1 with none

	deadline    time.Time
	hasDeadline bool
	// ownDeadline: the deadline is the envelope's own (not the pool's
	// default, which a retry may beat on a faster worker).
	ownDeadline bool
	// unrun: refused, before its handler ran, because a cancel of it
	// came or its deadline passed (refusal).
	unrun bool
}

// handle runs one delivery to its end, phase by phase, and returns its
// outcome.
func (w *worker) handle(m jetstream.Msg, sl *slot) (outcome string) {
	d, outcome, ok := w.pickUp(m)
	if !ok {
		return outcome
	}
	// Registered first: heartbeats hold the delivery, the give-up's too
	// (its reads and fenced retries can outlast AckWait: the server then
	// sent the max-deliveries advisory, and every worker closed it again).
	r := &request{id: d.id, msg: m, slot: sl, stored: d.meta.Timestamp}
	w.register(r)
	defer w.unregister(r)
	if d.meta.NumDelivered > uint64(w.cfg.maxDeliver) {
		return w.giveUp(d) // advisory.go
	}
	// With tracing on, the delivery is a consumer span, child of the
	// request's publish; frames and the handler's own spans are its
	// children.
	if tracing.Enabled() {
		var span trace.Span
		d.spanCtx, span = w.startHandleSpan(m.Subject(), d.env, d.id, d.meta.NumDelivered)
		defer func() { endHandleSpan(span, outcome) }()
	}
	if out, ok := w.resume(d); !ok {
		return out
	}
	hctx, stop, cancelledLive := w.start(d, r)
	defer stop(nil)
	// A later turn of a task or session: the handler runs once the turn
	// before has ended (turns.go). A request with frames already waited
	// before it wrote them.
	var chain []string
	if d.last == nil {
		chain = turnChain(m, d.id)
	}
	f, refused := w.refusal(d, cancelledLive)
	r.ownDeadline = d.ownDeadline
	if refused {
		if d.unrun && len(chain) > 0 {
			// Cancelled, or past its deadline, before it was picked up:
			// it ends after the turn before it, as it would have run.
			if held := w.holdUnrun(d, r, chain); held != nil {
				out, _ := w.stopped(r, held, d.log, func(time.Duration) bool { return true }, 0)
				return out
			}
		}
		return w.end(r, f, d.log)
	}
	if d.hasDeadline {
		var cancelDL context.CancelFunc
		hctx, cancelDL = context.WithDeadlineCause(hctx, d.deadline, ErrDeadlineExceeded)
		defer cancelDL()
	}
	if len(chain) > 0 {
		if out, wait := w.awaitTurn(hctx, d, r, chain); wait {
			return out
		}
	}
	return w.runHandler(d, r, hctx)
}

// pickUp reads the delivery m: its metadata, envelope, request id and
// response subject. ok is false when no frame can be written for it: m is
// terminated and outcome is OutcomeInvalid. An envelope that does not
// decode is picked up (d.perr) and answered with a final error frame.
func (w *worker) pickUp(m jetstream.Msg) (d *delivery, outcome string, ok bool) {
	meta, err := m.Metadata()
	if err != nil {
		w.log.Error("request without JetStream metadata", "subject", m.Subject(), "err", err)
		_ = m.Term()
		return nil, OutcomeInvalid, false
	}
	if meta.NumDelivered > 1 {
		w.metrics.redeliveries.WithLabelValues(w.pool).Inc()
	}
	env, perr := e2a.FromJSON(m.Data())
	id, tokErr, ok := w.requestID(m, env, perr)
	if !ok {
		return nil, OutcomeInvalid, false
	}
	if perr == nil {
		perr = tokErr // answered with a final error frame, never run
	}
	if env == nil {
		env = &e2a.Envelope{}
	}
	env.RequestID = id // the subject token is authoritative
	if env.Trace == nil {
		// An integrator publishing straight onto the subject carries trace
		// context in the message headers only.
		if h := m.Headers(); h != nil && h.Get(subjects.HeaderTraceparent) != "" {
			env.Trace = &e2a.TraceContext{Traceparent: h.Get(subjects.HeaderTraceparent), Tracestate: h.Get(subjects.HeaderTracestate)}
		}
	}
	// A request published straight onto the subject did not pass the front
	// door's check: the handler, its logs, its frames and an upstream see
	// only a valid trace context (an invalid traceparent is dropped with
	// its tracestate, W3C's "must not propagate").
	env.Trace = e2a.CleanTrace(env.Trace)
	respSubj, err := subjects.Response(id)
	if err != nil {
		w.log.Error("request id unusable: terminated", "err", err)
		_ = m.TermWithReason("request id unusable")
		return nil, OutcomeInvalid, false
	}
	log := &reqLogger{base: w.log, id: id, delivery: meta.NumDelivered, correlationID: env.CorrelationID}
	if env.Trace != nil {
		log.traceparent = env.Trace.Traceparent
	}
	d = &delivery{m: m, meta: meta, env: env, perr: perr, id: id, respSubj: respSubj, log: log,
		spanCtx: context.Background(), lastSeq: -1}
	return d, "", true
}

// requestID is m's request id: its subject's token, else the envelope's.
// ok is false when it has none (m is terminated). tokErr is set when the
// subject's token is not the canonical encoding of an id (only an
// integrator publishing straight on the subject can send one) while the
// envelope names an id: the request is stored under a subject no read by
// that id finds (egress, replay, the console look for
// subjects.Request(pool, id)), so it is answered under the envelope's id
// with an error naming the subject to publish on, not run.
func (w *worker) requestID(m jetstream.Msg, env *e2a.Envelope, perr error) (id string, tokErr error, ok bool) {
	_, id, serr := subjects.ParseRequest(m.Subject())
	if serr != nil {
		if perr != nil || env.RequestID == "" {
			w.log.Error("request without a request id: terminated", "subject", m.Subject(), "err", serr)
			_ = m.TermWithReason("no request id")
			return "", nil, false
		}
		id = env.RequestID
		tokErr = fmt.Errorf("published on %.200q, whose id token is not the canonical encoding of a request id (%v): publish request %.200q on %.200q", m.Subject(), serr, id, canonicalSubject(m.Subject(), id))
	}
	if id == "" {
		// No frame can be written for it (a frame requires a request id).
		w.log.Error("request with an empty request id: terminated", "subject", m.Subject())
		_ = m.TermWithReason("empty request id")
		return "", nil, false
	}
	return id, tokErr, true
}

// canonicalSubject is the subject a request with id should have been
// published on: subjects.Request with the pool token of subject, or the
// rule spelled out when the pool token or the id is unusable.
func canonicalSubject(subject, id string) string {
	if pool, err := subjects.RequestPool(subject); err == nil {
		if subj, err := subjects.Request(pool, id); err == nil {
			return subj
		}
	}
	return "e2a.req.<pool>.<subjects.EncodeID(request_id)>"
}

// resume reads, for a redelivery, what the response subject already holds
// (its last message's last frame) into d.last and d.lastSeq. ok is false
// when the delivery ended here: its final frame is stored (acked,
// OutcomeAlreadyFinal) or the reads failed (handed back, OutcomeLost).
//
// A first delivery assumes nothing is there; if something is, its first
// publish is refused and tells. An earlier delivery still writing is
// fenced: each of its messages expects the one before, and ours come after
// what we read. Workers of earlier versions sent frames in fast batches
// fenced on the request's lease subject instead: a redelivery first stores
// a lease, so that none of those lands after what it reads (during a
// rolling upgrade). A first delivery of a request stored before its
// consumer was made is read as a redelivery: an earlier consumer of the
// pool, deleted since, may have delivered it (rebind.go).
func (w *worker) resume(d *delivery) (outcome string, ok bool) {
	if d.meta.NumDelivered <= 1 && !w.deliveredBefore(d.meta.Timestamp) {
		return "", true
	}
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	leaseSubj, _ := subjects.ResponseLease(d.id)
	if _, err := storeLease(ctx, w.js.Conn(), leaseSubj, d.id, w.cfg.workerID); err != nil {
		cancel()
		d.log.get().Warn("cannot store the lease: handing back", "err", err)
		_ = d.m.NakWithDelay(time.Second)
		return OutcomeLost, false
	}
	last, err := lastMsg(ctx, w.js, w.streams.Responses, d.respSubj)
	cancel()
	if err != nil {
		d.log.get().Warn("cannot read existing frames: handing back", "err", err)
		_ = d.m.NakWithDelay(time.Second)
		return OutcomeLost, false
	}
	if last == nil {
		return "", true
	}
	h, ferr := last.frame()
	if ferr != nil {
		d.log.get().Error("last stored frame does not decode", "err", ferr)
		if seq, ok := seqHeader(last); ok {
			h.Sequence = seq
		}
	}
	if h.IsFinal {
		_ = d.m.Ack()
		return OutcomeAlreadyFinal, false
	}
	d.last, d.lastSeq = last, h.Sequence
	return "", true
}

// start makes r's writer (after what resume read) and the handler's
// context hctx, stopped by stop with the runtime's cause (a cancel, a
// shutdown, the writer's failure). cancelledLive reports a live cancel
// received before stop was set.
func (w *worker) start(d *delivery, r *request) (hctx context.Context, stop context.CancelCauseFunc, cancelledLive bool) {
	wr := newWriter(w, d.env, d.id, d.respSubj, d.last, d.lastSeq)
	if tracing.Enabled() {
		wr.spanCtx = d.spanCtx
		wr.trace = tracing.Inject(d.spanCtx)
	}
	r.wr = wr

	hctx, stop = context.WithCancelCause(withTrace(d.spanCtx, wr.trace))
	w.mu.Lock()
	r.stop = stop
	cancelledLive = r.cancelled
	stopping := w.stopCause
	w.mu.Unlock()
	if stopping != nil {
		stop(stopping)
	}
	wr.onFatal = func(err error) { stop(err) }
	return hctx, stop, cancelledLive
}

// refusal is the final frame of a request answered before its handler
// runs: invalid, cancelled, past its deadline, or partial and not
// resumable. It sets d's deadline.
func (w *worker) refusal(d *delivery, cancelledLive bool) (f frame, refused bool) {
	if d.perr != nil {
		return errorFrame(e2a.ErrCodeInvalidRequest, d.perr.Error(), false, nil), true
	}
	if ierr := subjects.ValidateRequestID(d.id); ierr != nil {
		// Only an integrator publishing on the subject directly can send
		// such an id (ingress refuses it). It is answered, once, with a
		// final error frame, fenced like every frame by its subject's
		// expected last sequence.
		d.log.get().Error("request id outside the id grammar: refused", "err", ierr)
		return errorFrame(e2a.ErrCodeInvalidRequest, ierr.Error(), false, nil), true
	}
	// A cancel turn (e2a.MethodCancelTurn) is cancelled whether or not its
	// stored cancel reached this worker; a TurnCanceller handler is told.
	if d.env.Method == e2a.MethodCancelTurn {
		return w.cancelTurnFrame(d), true
	}
	if cancelledLive || w.cancelledAtPickUp(d.id, d.meta.Sequence.Stream, d.meta.Timestamp, d.log) {
		// A redelivery may have been started by the worker before: a
		// RequestCanceller handler is told, to stop what that one
		// started.
		w.cancelRequest(d)
		d.unrun = true
		return cancelFrame(), true
	}
	d.deadline, d.hasDeadline, d.ownDeadline = w.deadline(d.env, d.meta)
	if d.hasDeadline && !time.Now().Before(d.deadline) {
		// As for a cancel: what an earlier delivery started stops too.
		w.cancelRequest(d)
		d.unrun = true
		return deadlineFrame(d.ownDeadline), true
	}
	if d.last != nil && !w.resumable {
		return errorFrame(e2a.ErrCodeAgentInterrupted,
			fmt.Sprintf("the agent was interrupted after frame %d and cannot resume", d.lastSeq), true, nil), true
	}
	return frame{}, false
}

// runHandler runs the handler with hctx and r's writer, then settles r by
// how it ended: the context's cause (stopped), or the handler's return
// (the frames it left unwritten, then its final frame: handlerFinal).
func (w *worker) runHandler(d *delivery, r *request, hctx context.Context) string {
	wr := r.wr
	wr.mu.Lock()
	wr.hctx = hctx
	wr.mu.Unlock()
	done := make(chan error, 1)
	w.gos.Go(func() { w.serveTo(hctx, done, d.env, wr) })

	var herr error
	returned := false
	select {
	case herr = <-done:
		returned = true
	case <-hctx.Done():
	}
	// wait waits for the handler to return (or the process's hard
	// stop), at most bound when bound > 0, and reports whether it did.
	wait := func(bound time.Duration) bool {
		if returned {
			return true
		}
		var limit <-chan time.Time
		if bound > 0 {
			t := time.NewTimer(bound)
			defer t.Stop()
			limit = t.C
		}
		select {
		case <-done:
			returned = true
		case <-w.hardStop:
		case <-limit:
		}
		return returned
	}
	// A request a later turn may follow (one of a task or a session)
	// ends once its handler has returned (at most the stop grace later),
	// another at once.
	grace := time.Duration(0)
	if d.env.TaskID != "" || d.env.SessionID != "" {
		grace = w.cfg.stopGrace
	}
	if hctx.Err() != nil {
		if out, ok := w.stopped(r, hctx, d.log, wait, grace); ok {
			return out
		}
	}
	wait(0)
	// The handler returned: its writes end here (a goroutine it left
	// writing is refused, as after a cancel: nothing may follow the final
	// frame the runtime writes now), then what it left unwritten is.
	wr.close(ErrWriterClosed, false)
	if ferr := wr.flush(); ferr != nil {
		return w.settle(r, ferr, d.log)
	}
	return w.end(r, handlerFinal(herr, d.log), d.log)
}

// handlerFinal is the final frame of a handler that returned herr (unless
// it wrote one): e2a.complete for nil, the *Error's e2a.error,
// handler_panic for a panic, handler_error for any other error.
func handlerFinal(herr error, log *reqLogger) frame {
	if herr == nil {
		return frame{kind: e2a.KindComplete, status: e2a.StatusSucceeded, body: e2a.CompleteBody{}, final: true}
	}
	return handlerErrorFinal(herr, log)
}

// handlerErrorFinal is handlerFinal for an error (the targets errorAs
// fills escape: kept off the path of a handler that returned nil).
func handlerErrorFinal(herr error, log *reqLogger) frame {
	var pe *panicError
	var ae *Error
	switch {
	case errorAs(herr, &pe):
		log.get().Error("handler panicked", "panic", pe.value, "stack", string(pe.stack))
		return errorFrame(e2a.ErrCodeHandlerPanic, "the agent failed unexpectedly", false, nil)
	case errorAs(herr, &ae) && ae != nil:
		// As Fail: a frame without a code or a message is not a valid
		// e2a.error (§12.5), and readers refuse it.
		code, msg := ae.Code, ae.Message
		if code == "" {
			code = e2a.ErrCodeHandlerError
		}
		if msg == "" {
			msg = code
		}
		return errorFrame(code, msg, ae.Retryable, ae.Details)
	}
	// A typed nil *Error too (its Error is nil-safe).
	return errorFrame(e2a.ErrCodeHandlerError, errorMessage(herr), false, nil)
}

// stopped ends r, whose context hctx is done, by the cause: a cancel or
// the deadline writes the final frame, once the handler has returned when
// grace > 0 (at most grace later: a later turn starts after that frame), a
// shutdown hands r back, a writer's failure (fenced, the connection lost)
// settles it; wait waits for the handler (at most its bound when > 0).
// ok is false for a context cancelled without a cause of the runtime's:
// the caller goes on as if the handler returned.
func (w *worker) stopped(r *request, hctx context.Context, log *reqLogger, wait func(bound time.Duration) bool, grace time.Duration) (outcome string, ok bool) {
	wr := r.wr
	cause := context.Cause(hctx)
	switch {
	case errors.Is(cause, ErrCancelled), errors.Is(cause, ErrDeadlineExceeded):
		wr.close(ErrWriterClosed, false)
		f := cancelFrame()
		if errors.Is(cause, ErrDeadlineExceeded) {
			f = deadlineFrame(r.ownDeadline)
		}
		if grace > 0 {
			w.graceStop(wait, grace, log)
		}
		out := w.end(r, f, log)
		wait(0)
		return out, true
	case errors.Is(cause, ErrShutdown):
		wr.close(ErrShutdown, true)
		if final, _, _, _, _ := wr.state(); final {
			out := w.settle(r, nil, log)
			wait(0)
			return out, true
		}
		w.unregister(r)
		_ = r.msg.Nak()
		wait(0)
		return OutcomeHandedBack, true
	case cause != nil && !errors.Is(cause, context.Canceled):
		// Fenced or the connection lost: the writer failed.
		wr.close(cause, true)
		out := w.settle(r, cause, log)
		wait(0)
		return out, true
	}
	return "", false
}

// graceStop waits for a stopped request's handler to return, at most
// grace (StopGrace), and logs one that did not.
func (w *worker) graceStop(wait func(bound time.Duration) bool, grace time.Duration, log *reqLogger) {
	if !wait(grace) {
		log.get().Warn("the handler did not return within the stop grace of its request's end; the final frame is "+
			"written with it still running (a later turn of its task may start beside it)", "grace", grace)
	}
}

// end writes f as the final frame unless one exists, then settles.
func (w *worker) end(r *request, f frame, log *reqLogger) string {
	_, err := r.wr.finish(f)
	return w.settle(r, err, log)
}

// settle acks, or leaves, the delivery according to the writer's state and
// err (the writer's failure, if any), and returns the outcome.
func (w *worker) settle(r *request, err error, log *reqLogger) string {
	if final, _, _, fatal, _ := r.wr.state(); !final {
		if err == nil {
			err = fatal
		}
		var ee *evictedError
		if errors.As(err, &ee) {
			err = w.endEvicted(r, ee, log)
		}
	}
	w.unregister(r)
	final, status, code, fatal, published := r.wr.state()
	if err == nil {
		err = fatal
	}
	if final {
		if aerr := r.msg.Ack(); aerr != nil {
			log.get().Debug("ack failed", "err", aerr)
		}
		return outcomeOf(status, code)
	}
	var fe *fencedError
	switch {
	case errors.As(err, &fe):
		if fe.lastFinal {
			// The request is finished by someone: nothing left to do.
			_ = r.msg.Ack()
			if published == 0 {
				return OutcomeAlreadyFinal
			}
		}
		// Another worker owns the request. Neither ack nor nak: either would
		// act on the current owner's delivery (acks go by stream sequence).
		log.get().Info("fenced out by another worker", "err", err)
		return OutcomeFenced
	case isFrameError(err):
		// Even the bare final frame (finishBare) was refused before
		// publishing: every delivery would be refused the same way.
		log.get().Error("no final frame can be written for the request: terminated", "err", err)
		_ = r.msg.TermWithReason("no final frame can be written")
		return OutcomeInvalid
	case err != nil:
		if !isClosed(err) {
			log.get().Warn("frames could not be written: handing back", "err", err)
			_ = r.msg.NakWithDelay(time.Second)
		}
		return OutcomeLost
	}
	// Not reached: finish writes a final frame or fails.
	_ = r.msg.Nak()
	return OutcomeLost
}

// endEvicted ends r, whose stored frames the stream dropped (ee), with the
// final e2a.error frames_evicted, retryable, as the frame after those the
// client was sent, so that its delivery is acked: redelivered, it would
// find no frame and run the handler again from the start (an upstream
// called twice, and a live client given the first answer's frames then
// the second's). It returns the error that kept it from writing that
// frame, if any.
func (w *worker) endEvicted(r *request, ee *evictedError, log *reqLogger) error {
	log.get().Warn("the stream dropped the request's stored frames (E2A_RESPONSES limits): ending it with frames_evicted",
		"err", ee, "next_sequence", ee.seq)
	r.wr.afterEviction()
	_, err := r.wr.finish(evictedFrame(ee))
	return err
}

func outcomeOf(status, code string) string {
	if status == e2a.StatusSucceeded {
		return OutcomeSucceeded
	}
	switch code {
	case e2a.ErrCodeCancelled:
		return OutcomeCancelled
	case e2a.ErrCodeDeadlineExceeded:
		return OutcomeDeadline
	case e2a.ErrCodeAgentInterrupted:
		return OutcomeInterrupted
	case e2a.ErrCodeHandlerPanic:
		return OutcomePanic
	case e2a.ErrCodeInvalidRequest:
		return OutcomeInvalid
	case e2a.ErrCodeMaxDeliveries:
		return OutcomeMaxDeliveries
	}
	return OutcomeFailed
}

func cancelFrame() frame {
	return errorFrame(e2a.ErrCodeCancelled, "the request was cancelled", false, nil)
}

// deadlineFrame is the final frame of a request past its deadline:
// retryable when the pool's default deadline (WithDefaultDeadline) cut it,
// which a retry may beat on a faster worker, not when it was the
// envelope's own (own): the same request sent again fails the same way.
func deadlineFrame(own bool) frame {
	return errorFrame(e2a.ErrCodeDeadlineExceeded, "the request passed its deadline", !own, nil)
}

// errorAs is errors.As on an error of the handler's: false when walking
// its chain panics (see errorMessage).
func errorAs(err error, target any) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return errors.As(err, target)
}

// errorMessage is the message of an error of the handler's, bounded
// (boundMessage). One whose Error panics, a typed nil of the handler's own
// error type (a function returning a nil *T as an error: T's methods
// dereference the nil pointer), is named by its type: it was read on the
// delivery's goroutine, unrecovered, and the process died, as every
// worker the request was redelivered to did.
func errorMessage(err error) (msg string) {
	defer func() {
		if recover() != nil {
			msg = fmt.Sprintf("the handler returned an error (%T) whose Error method panicked", err)
		}
	}()
	return boundMessage(err.Error())
}

type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("agent: handler panic: %v", p.value) }

// recovered calls f, turning a panic into a *panicError.
func recovered(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	return f()
}

// serve runs the handler, turning a panic into a *panicError.
func (w *worker) serve(ctx context.Context, env *e2a.Envelope, wr *writer) error {
	return recovered(func() error { return w.h.Serve(ctx, env, wr) })
}

// goexitPanic is the panic value given to a handler whose goroutine ended by
// runtime.Goexit (t.FailNow, or a library calling it): it neither returned
// nor panicked.
const goexitPanic = "handler goroutine exited (runtime.Goexit)"

// serveTo runs the handler (serve) and sends how it ended on done, from a
// deferred call: a goroutine ended by runtime.Goexit sends a *panicError
// too, so that the request still ends with its final frame.
func (w *worker) serveTo(ctx context.Context, done chan<- error, env *e2a.Envelope, wr *writer) {
	var err error
	returned := false
	defer func() {
		if !returned {
			err = &panicError{value: goexitPanic, stack: debug.Stack()}
		}
		done <- err
	}()
	err = w.serve(ctx, env, wr)
	returned = true
}

// deadline returns the request's deadline: the earlier of the envelope's
// and the stored time plus the default deadline; own reports that it is
// the envelope's.
func (w *worker) deadline(env *e2a.Envelope, meta *jetstream.MsgMetadata) (dl time.Time, has, own bool) {
	if env.Deadline != "" {
		if t, err := e2a.ParseTime(env.Deadline); err == nil {
			dl, own = t, true
		}
	}
	if w.cfg.defaultDL > 0 {
		d := meta.Timestamp.Add(w.cfg.defaultDL)
		if dl.IsZero() || d.Before(dl) {
			dl, own = d, false
		}
	}
	return dl, !dl.IsZero(), own
}

// seqHeader is the sequence of the last frame m holds, by its headers
// (E2A-Sequence, and E2A-Frames on a burst).
func seqHeader(m *storedMsg) (int64, bool) {
	n, err := strconv.ParseInt(m.header.Get(subjects.HeaderSequence), 10, 64)
	if err != nil {
		return 0, false
	}
	count, err := e2a.BurstCount(m.header.Get(subjects.HeaderFrames))
	if err != nil {
		return 0, false
	}
	return n + int64(count) - 1, true
}
