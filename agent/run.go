package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/tracing"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Handler serves one request: it reads the envelope and writes frames. The
// context is cancelled when the client cancels, the deadline passes, another
// worker took the request over (cause ErrFenced), or the worker shuts down
// after its drain timeout (cause ErrShutdown); context.Cause tells which.
//
// Returning without a final frame lets the runtime write it: nil becomes
// e2a.complete with a null result, an *Error its e2a.error, any other error
// e2a.error handler_error, a panic e2a.error handler_panic. On cancellation
// and deadline the runtime writes the final frame itself (cancelled,
// deadline_exceeded) as soon as the context is done; later writes return
// ErrWriterClosed.
type Handler interface {
	Serve(ctx context.Context, env *e2a.Envelope, w Writer) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, env *e2a.Envelope, w Writer) error

// Serve calls f.
func (f HandlerFunc) Serve(ctx context.Context, env *e2a.Envelope, w Writer) error {
	return f(ctx, env, w)
}

// Resumer is implemented by a handler that decides for itself whether it can
// resume a request that already has frames (Writer.ResumeAfter ≥ 0). It
// overrides WithResumable.
type Resumer interface {
	Resumable() bool
}

type streamNames struct{ Requests, Responses, Control string }

var defaultStreams = streamNames{
	Requests:  streams.RequestsStream,
	Responses: streams.ResponsesStream,
	Control:   streams.ControlStream,
}

// worker is one Run.
type worker struct {
	js        jetstream.JetStream
	pool      string
	consumer  string
	h         Handler
	cfg       config
	metrics   *metrics
	streams   streamNames
	log       *slog.Logger
	resumable bool

	mu        sync.Mutex
	active    map[*request]struct{}
	byID      map[string][]*request
	wg        sync.WaitGroup
	hardStop  chan struct{}
	stopCause error // set by stopAll: requests picked up later stop at once

	cancels *cancelWatch // the cancels received live, and what they prove

	detailsOnce sync.Once
	details     map[string]any // provenance.details of every frame; read only
}

// provenanceDetails returns the provenance details every frame of the
// worker carries (pool, worker id): one map for all its requests, which
// only read it (the frame encoder encodes it once per request).
func (w *worker) provenanceDetails() map[string]any {
	w.detailsOnce.Do(func() { w.details = map[string]any{"pool": w.pool, "worker": w.cfg.workerID} })
	return w.details
}

// request is one delivery being handled.
type request struct {
	id        string
	msg       jetstream.Msg
	stop      context.CancelCauseFunc
	wr        *writer
	slot      *slot // the fetch loop's slot it holds
	cancelled bool  // a live cancel arrived before stop was set
}

// Run serves agent pool pool with handler h on nc until ctx is done. It
// provisions the pool's durable pull consumer (agent-<pool> on E2A_REQUESTS,
// see WithProvisionConsumer), pulls requests only for free slots
// (WithConcurrency), sends InProgress for every request it holds, listens to
// cancels and to the consumer's max-deliveries advisory, and writes every
// frame fenced (see Writer).
//
// When ctx is done Run stops pulling, waits up to the drain timeout for
// in-flight requests, hands the others back to the pool (Nak, their handlers'
// contexts cancelled with ErrShutdown) and returns nil. It returns an error
// when the options are invalid, the consumer cannot be made, or the
// connection is closed under it.
func Run(ctx context.Context, nc *nats.Conn, pool string, h Handler, opts ...Option) error {
	if nc == nil || h == nil {
		return fmt.Errorf("%w: nil connection or handler", ErrInvalidOption)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return err
		}
	}
	if err := cfg.finish(); err != nil {
		return err
	}
	if cfg.workerID == "" {
		cfg.workerID = uuid.NewString()
	}
	consumerName, err := streams.AgentConsumerName(pool)
	if err != nil {
		return err
	}
	m, err := newMetrics(cfg.registerer)
	if err != nil {
		return fmt.Errorf("agent: metrics: %w", err)
	}
	// Series of the pool exist from the start (at 0).
	m.inFlight.WithLabelValues(pool)
	m.frames.WithLabelValues(pool)
	m.redeliveries.WithLabelValues(pool)
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	w := &worker{
		js: js, pool: pool, consumer: consumerName, h: h, cfg: cfg, metrics: m,
		streams:  defaultStreams,
		log:      cfg.logger.With("pool", pool, "worker", cfg.workerID),
		active:   map[*request]struct{}{},
		byID:     map[string][]*request{},
		hardStop: make(chan struct{}),
		cancels:  newCancelWatch(cancelSetLimit),
	}
	w.resumable = cfg.resumable
	if r, ok := h.(Resumer); ok {
		w.resumable = r.Resumable()
	}
	return w.run(ctx)
}

func (w *worker) consumerConfig() (jetstream.ConsumerConfig, error) {
	opts := []streams.ConsumerOption{streams.WithAckWait(w.cfg.ackWait), streams.WithMaxDeliver(w.cfg.maxDeliver)}
	if len(w.cfg.backOff) > 0 {
		opts = append(opts, streams.WithBackOff(w.cfg.backOff...))
	} else {
		// A constant ack wait: heartbeats keep live requests, so the wait
		// only sets how soon a dead worker's request is picked up again.
		steps := make([]time.Duration, w.cfg.maxDeliver)
		for i := range steps {
			steps[i] = w.cfg.ackWait
		}
		opts = append(opts, streams.WithBackOff(steps...))
	}
	return streams.AgentConsumerConfig(w.pool, w.cfg.maxAckPending, opts...)
}

// consumerHandle provisions (or looks up) the pool's consumer, retrying
// while the cluster is unavailable (elections, a stream not applied yet)
// until ctx is done.
func (w *worker) consumerHandle(ctx context.Context) (jetstream.Consumer, error) {
	cc, err := w.consumerConfig()
	if err != nil {
		return nil, err
	}
	backoff := 100 * time.Millisecond
	for {
		attempt, cancel := context.WithTimeout(ctx, 10*time.Second)
		var cons jetstream.Consumer
		if w.cfg.provision {
			cons, err = w.js.CreateOrUpdateConsumer(attempt, w.streams.Requests, cc)
		} else {
			cons, err = w.js.Consumer(attempt, w.streams.Requests, w.consumer)
		}
		cancel()
		if err == nil {
			return cons, nil
		}
		if isClosed(err) || w.js.Conn().IsClosed() {
			return nil, fmt.Errorf("agent: consumer %s: %w", w.consumer, err)
		}
		w.log.Warn("consumer not available yet, retrying", "consumer", w.consumer, "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("agent: consumer %s: %w", w.consumer, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (w *worker) run(ctx context.Context) error {
	setup, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := w.consumerHandle(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started
		}
		return err
	}
	nc := w.js.Conn()
	ctlSub, err := nc.Subscribe(subjects.AllControl, w.onControl)
	if err != nil {
		return err
	}
	defer func() { _ = ctlSub.Unsubscribe() }()
	advSub, err := nc.Subscribe(subjects.MaxDeliveriesAdvisory(w.streams.Requests, w.consumer), w.onMaxDeliveries)
	if err != nil {
		return err
	}
	defer func() { _ = advSub.Unsubscribe() }()
	// The subscriptions are registered before the first pick-up checks the
	// stored control message, so no cancel falls between the two.
	if err := nc.FlushWithContext(setup); err != nil {
		return err
	}
	w.cancels.nc, w.cancels.sub = nc, ctlSub
	w.cancels.read = lastSeqReader(w.js, w.streams.Requests)
	if err := w.cancels.anchorNow(setup); err != nil {
		// Every pick-up reads the stored cancel until a later read works.
		w.log.Warn("cannot read the requests stream's last sequence: every pick-up reads its stored cancel", "err", err)
	}

	hbDone := make(chan struct{})
	hbStopped := make(chan struct{})
	go w.heartbeats(hbDone, hbStopped)
	defer func() { close(hbDone); <-hbStopped }()

	w.log.Debug("agent worker started", "concurrency", w.cfg.concurrency, "ack_wait", w.cfg.ackWait)
	ferr := w.fetchLoop(ctx, cons)
	if ferr == nil && nc.IsClosed() {
		ferr = nats.ErrConnectionClosed
	}
	if ferr != nil {
		// The connection is gone: nothing can be written, acked or handed
		// back. Stop the handlers and leave the requests to redelivery.
		w.stopAll(ferr)
		w.waitOrStop(time.Second)
		return fmt.Errorf("agent: pool %s: %w", w.pool, ferr)
	}
	// Drain: wait for in-flight requests, then hand the rest back.
	if !w.waitFor(w.cfg.drainTimeout) {
		w.log.Info("drain timeout: handing back in-flight requests", "in_flight", w.inFlight())
		w.stopAll(ErrShutdown)
		w.waitOrStop(5 * time.Second)
	}
	return nil
}

// waitFor waits up to d for every request goroutine; it reports whether
// they all finished.
func (w *worker) waitFor(d time.Duration) bool {
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// waitOrStop waits up to d, then lets request goroutines stop waiting for
// handlers that ignore their context.
func (w *worker) waitOrStop(d time.Duration) {
	if !w.waitFor(d) {
		close(w.hardStop)
		w.waitFor(d)
	}
}

func (w *worker) inFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.active)
}

func (w *worker) stopAll(cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopCause = cause
	for r := range w.active {
		if r.stop != nil {
			r.stop(cause)
		}
	}
}

// fetchLoop pulls requests for free slots until ctx is done (nil) or the
// connection is closed (its error).
func (w *worker) fetchLoop(ctx context.Context, cons jetstream.Consumer) error {
	n := w.cfg.concurrency
	slots := make(chan struct{}, n)
	backoff := 10 * time.Millisecond
	for {
		// A done ctx wins over a free slot: select picks at random among
		// ready cases, and every extra pull would hold the stop for up to
		// the fetch wait.
		if ctx.Err() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case slots <- struct{}{}:
		}
		want := 1
	more:
		for want < n {
			select {
			case slots <- struct{}{}:
				want++
			default:
				break more
			}
		}
		batch, err := cons.Fetch(want, jetstream.FetchMaxWait(w.cfg.fetchWait))
		if err != nil {
			for range want {
				<-slots
			}
			if isClosed(err) || w.js.Conn().IsClosed() {
				return nats.ErrConnectionClosed
			}
			w.log.Warn("fetch failed", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		got := 0
		for m := range batch.Messages() {
			got++
			if ctx.Err() != nil {
				_ = m.Nak()
				<-slots
				continue
			}
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				sl := &slot{c: slots, held: true}
				defer sl.release()
				w.process(m, sl)
			}()
		}
		for range want - got {
			<-slots
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			if isClosed(err) || w.js.Conn().IsClosed() {
				return nats.ErrConnectionClosed
			}
			w.log.Debug("fetch ended", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 10 * time.Millisecond
	}
}

// heartbeats tells the server every heartbeat that each held request is in
// progress, which restarts its ack wait.
func (w *worker) heartbeats(done <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	t := time.NewTicker(w.cfg.heartbeat)
	defer t.Stop()
	var held []*request
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		held = held[:0]
		w.mu.Lock()
		for r := range w.active {
			held = append(held, r)
		}
		w.mu.Unlock()
		if w.cfg.noHeartbeat {
			continue
		}
		for _, r := range held {
			_ = r.msg.InProgress()
		}
	}
}

func (w *worker) register(r *request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.active[r] = struct{}{}
	w.byID[r.id] = append(w.byID[r.id], r)
}

// unregister stops heartbeats and cancel delivery for r.
func (w *worker) unregister(r *request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.active[r]; !ok {
		return
	}
	delete(w.active, r)
	list := w.byID[r.id]
	for i, x := range list {
		if x == r {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(w.byID, r.id)
	} else {
		w.byID[r.id] = list
	}
}

// process handles one delivery, holding slot sl, and records its metrics.
func (w *worker) process(m jetstream.Msg, sl *slot) {
	start := time.Now()
	g := w.metrics.inFlight.WithLabelValues(w.pool)
	g.Inc()
	outcome := w.handle(m, sl)
	g.Dec()
	w.metrics.handled.WithLabelValues(w.pool, outcome).Inc()
	w.metrics.duration.WithLabelValues(w.pool).Observe(time.Since(start).Seconds())
}

// maxErrorMessage bounds the message of a handler_error frame, taken from
// the handler's error.
const maxErrorMessage = 1024

// ioTimeout bounds the reads of the pick-up.
const ioTimeout = 5 * time.Second

// handle runs one delivery to its end and returns its outcome.
func (w *worker) handle(m jetstream.Msg, sl *slot) (outcome string) {
	meta, err := m.Metadata()
	if err != nil {
		w.log.Error("request without JetStream metadata", "subject", m.Subject(), "err", err)
		_ = m.Term()
		return OutcomeInvalid
	}
	if meta.NumDelivered > 1 {
		w.metrics.redeliveries.WithLabelValues(w.pool).Inc()
	}
	env, perr := e2a.FromJSON(m.Data())
	_, id, serr := subjects.ParseRequest(m.Subject())
	if serr != nil {
		if perr != nil || env.RequestID == "" {
			w.log.Error("request without a request id: terminated", "subject", m.Subject(), "err", serr)
			_ = m.TermWithReason("no request id")
			return OutcomeInvalid
		}
		id = env.RequestID
	}
	if id == "" {
		// No frame can be written for it (a frame requires a request id).
		w.log.Error("request with an empty request id: terminated", "subject", m.Subject())
		_ = m.TermWithReason("empty request id")
		return OutcomeInvalid
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
	respSubj, err := subjects.Response(id)
	if err != nil {
		w.log.Error("request id unusable: terminated", "err", err)
		_ = m.TermWithReason("request id unusable")
		return OutcomeInvalid
	}
	// With tracing on, the delivery is a consumer span, child of the
	// request's publish; frames and the handler's own spans are its
	// children.
	spanCtx := context.Background()
	if tracing.Enabled() {
		var span trace.Span
		spanCtx, span = w.startHandleSpan(m.Subject(), env, id, meta.NumDelivered)
		defer func() { endHandleSpan(span, outcome) }()
	}
	log := &reqLogger{base: w.log, id: id, delivery: meta.NumDelivered, correlationID: env.CorrelationID}
	if env.Trace != nil {
		log.traceparent = env.Trace.Traceparent
	}

	r := &request{id: id, msg: m, slot: sl}
	w.register(r)
	defer w.unregister(r)

	// A redelivery reads what the response subject already holds (its
	// last message's last frame). A first delivery assumes nothing is
	// there; if something is, its first publish is refused and tells. An
	// earlier delivery still writing is fenced: each of its messages
	// expects the one before, and ours come after what we read. Workers of
	// earlier versions sent frames in fast batches fenced on the request's
	// lease subject instead: a redelivery first stores a lease, so that
	// none of those lands after what it reads (during a rolling upgrade).
	var last *storedMsg
	lastSeq := int64(-1)
	if meta.NumDelivered > 1 {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		leaseSubj, _ := subjects.ResponseLease(id)
		if _, err := storeLease(ctx, w.js.Conn(), leaseSubj, id, w.cfg.workerID); err != nil {
			cancel()
			log.get().Warn("cannot store the lease: handing back", "err", err)
			_ = m.NakWithDelay(time.Second)
			return OutcomeLost
		}
		last, err = lastMsg(ctx, w.js, w.streams.Responses, respSubj)
		cancel()
		if err != nil {
			log.get().Warn("cannot read existing frames: handing back", "err", err)
			_ = m.NakWithDelay(time.Second)
			return OutcomeLost
		}
		if last != nil {
			h, ferr := last.frame()
			if ferr != nil {
				log.get().Error("last stored frame does not decode", "err", ferr)
				if seq, ok := seqHeader(last); ok {
					h.Sequence = seq
				}
			}
			if h.IsFinal {
				_ = m.Ack()
				return OutcomeAlreadyFinal
			}
			lastSeq = h.Sequence
		}
	}
	wr := newWriter(w, env, id, respSubj, last, lastSeq)
	if tracing.Enabled() {
		wr.spanCtx = spanCtx
		wr.trace = tracing.Inject(spanCtx)
	}
	r.wr = wr

	hctx, stop := context.WithCancelCause(withTrace(spanCtx, wr.trace))
	defer stop(nil)
	w.mu.Lock()
	r.stop = stop
	cancelledLive := r.cancelled
	stopping := w.stopCause
	w.mu.Unlock()
	if stopping != nil {
		stop(stopping)
	}
	wr.onFatal = func(err error) { stop(err) }

	// Before the handler: invalid, cancelled, past its deadline, or partial
	// and not resumable.
	if perr != nil {
		return w.end(r, errorFrame(e2a.ErrCodeInvalidRequest, perr.Error(), false, nil), log)
	}
	if ierr := subjects.ValidateRequestID(id); ierr != nil {
		// Only an integrator publishing on the subject directly can send
		// such an id (ingress refuses it). It is answered, once, with a
		// final error frame, fenced like every frame by its subject's
		// expected last sequence.
		log.get().Error("request id outside the id grammar: refused", "err", ierr)
		return w.end(r, errorFrame(e2a.ErrCodeInvalidRequest, ierr.Error(), false, nil), log)
	}
	if cancelledLive || w.cancelledAtPickUp(id, meta.Sequence.Stream, log) {
		return w.end(r, cancelFrame(), log)
	}
	deadline, hasDeadline := w.deadline(env, meta)
	if hasDeadline && !time.Now().Before(deadline) {
		return w.end(r, deadlineFrame(), log)
	}
	if last != nil && !w.resumable {
		return w.end(r, errorFrame(e2a.ErrCodeAgentInterrupted,
			fmt.Sprintf("the agent was interrupted after frame %d and cannot resume", lastSeq), true, nil), log)
	}

	if hasDeadline {
		var cancelDL context.CancelFunc
		hctx, cancelDL = context.WithDeadlineCause(hctx, deadline, ErrDeadlineExceeded)
		defer cancelDL()
	}
	if after := turnAfter(m, id); after != "" && last == nil {
		// A later turn of a task or session: the handler runs once the
		// turn before has ended (turns.go). A request with frames already
		// waited before it wrote them.
		if out, wait := w.awaitTurn(hctx, r, after, meta, log); wait {
			return out
		}
	}
	wr.mu.Lock()
	wr.hctx = hctx
	wr.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- w.serve(hctx, env, wr) }()

	var herr error
	returned := false
	select {
	case herr = <-done:
		returned = true
	case <-hctx.Done():
	}
	wait := func() {
		if !returned {
			select {
			case <-done:
			case <-w.hardStop:
			}
		}
	}
	if hctx.Err() != nil {
		if out, ok := w.stopped(r, hctx, log, wait); ok {
			return out
		}
	}
	wait()
	// The handler returned: write what it left unwritten.
	if ferr := wr.flush(); ferr != nil {
		return w.settle(r, ferr, log)
	}
	var f frame
	var pe *panicError
	var ae *Error
	switch {
	case errors.As(herr, &pe):
		log.get().Error("handler panicked", "panic", pe.value, "stack", string(pe.stack))
		f = errorFrame(e2a.ErrCodeHandlerPanic, "the agent failed unexpectedly", false, nil)
	case errors.As(herr, &ae):
		f = errorFrame(ae.Code, ae.Message, ae.Retryable, ae.Details)
	case herr != nil:
		msg := herr.Error()
		if len(msg) > maxErrorMessage {
			msg = msg[:maxErrorMessage] + "…"
		}
		f = errorFrame(e2a.ErrCodeHandlerError, msg, false, nil)
	default:
		f = frame{kind: e2a.KindComplete, status: e2a.StatusSucceeded, body: e2a.CompleteBody{}, final: true}
	}
	return w.end(r, f, log)
}

// stopped ends r, whose context hctx is done, by the cause: a cancel or
// the deadline writes the final frame, a shutdown hands r back, a
// writer's failure (fenced, the connection lost) settles it; wait waits
// for the handler. ok is false for a context cancelled without a cause of
// the runtime's: the caller goes on as if the handler returned.
func (w *worker) stopped(r *request, hctx context.Context, log *reqLogger, wait func()) (outcome string, ok bool) {
	wr := r.wr
	cause := context.Cause(hctx)
	switch {
	case errors.Is(cause, ErrCancelled):
		wr.close(ErrWriterClosed, false)
		out := w.end(r, cancelFrame(), log)
		wait()
		return out, true
	case errors.Is(cause, ErrDeadlineExceeded):
		wr.close(ErrWriterClosed, false)
		out := w.end(r, deadlineFrame(), log)
		wait()
		return out, true
	case errors.Is(cause, ErrShutdown):
		wr.close(ErrShutdown, true)
		if final, _, _, _, _ := wr.state(); final {
			out := w.settle(r, nil, log)
			wait()
			return out, true
		}
		w.unregister(r)
		_ = r.msg.Nak()
		wait()
		return OutcomeHandedBack, true
	case cause != nil && !errors.Is(cause, context.Canceled):
		// Fenced or the connection lost: the writer failed.
		wr.close(cause, true)
		out := w.settle(r, cause, log)
		wait()
		return out, true
	}
	return "", false
}

// end writes f as the final frame unless one exists, then settles.
func (w *worker) end(r *request, f frame, log *reqLogger) string {
	_, err := r.wr.finish(f)
	return w.settle(r, err, log)
}

// settle acks, or leaves, the delivery according to the writer's state and
// err (the writer's failure, if any), and returns the outcome.
func (w *worker) settle(r *request, err error, log *reqLogger) string {
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

func deadlineFrame() frame {
	return errorFrame(e2a.ErrCodeDeadlineExceeded, "the request passed its deadline", true, nil)
}

type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("agent: handler panic: %v", p.value) }

// serve runs the handler, turning a panic into a *panicError.
func (w *worker) serve(ctx context.Context, env *e2a.Envelope, wr *writer) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	return w.h.Serve(ctx, env, wr)
}

// deadline returns the request's deadline: the earlier of the envelope's
// and the stored time plus the default deadline.
func (w *worker) deadline(env *e2a.Envelope, meta *jetstream.MsgMetadata) (time.Time, bool) {
	var dl time.Time
	if env.Deadline != "" {
		if t, err := e2a.ParseTime(env.Deadline); err == nil {
			dl = t
		}
	}
	if w.cfg.defaultDL > 0 {
		d := meta.Timestamp.Add(w.cfg.defaultDL)
		if dl.IsZero() || d.Before(dl) {
			dl = d
		}
	}
	return dl, !dl.IsZero()
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

// controlMsg is the body of a control message.
type controlMsg struct {
	Type      string `json:"type"`
	RequestID string `json:"request_id,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Timestamp string `json:"timestamp,omitempty"`
}

// ControlCancel is the type of a cancel control message.
const ControlCancel = "cancel"

func isCancel(data []byte) bool {
	var c controlMsg
	return json.Unmarshal(data, &c) == nil && c.Type == ControlCancel
}

// cancelledAtPickUp reports whether the request id, stored at stream
// sequence seq, was cancelled before its pick-up: from the cancels received
// live when they answer for it (cancelWatch), else from the stored cancel.
func (w *worker) cancelledAtPickUp(id string, seq uint64, log *reqLogger) bool {
	cancelled, covered := w.cancels.check(id, seq)
	if cancelled || covered {
		return cancelled
	}
	return w.cancelStored(id, log)
}

// cancelStored reports whether a cancel for id is stored (a cancel sent
// before the pick-up). A read failure is logged and counts as no cancel; the
// live subscription still sees later ones.
func (w *worker) cancelStored(id string, log *reqLogger) bool {
	subj, err := subjects.Control(id)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	m, err := lastMsg(ctx, w.js, w.streams.Control, subj)
	if err != nil {
		log.get().Warn("cannot read the control subject", "err", err)
		return false
	}
	return m != nil && isCancel(m.data)
}

// reqLogger is the logger of one delivery. Its attributes (request id,
// delivery count, correlation id, traceparent) are added on first use:
// most deliveries log nothing, and slog's With formats them at once. Used
// by the delivery's own goroutine only.
type reqLogger struct {
	base                           *slog.Logger
	id, correlationID, traceparent string
	delivery                       uint64
	l                              *slog.Logger
}

func (r *reqLogger) get() *slog.Logger {
	if r.l == nil {
		l := r.base.With("request_id", r.id, "delivery", r.delivery)
		if r.correlationID != "" {
			l = l.With("correlation_id", r.correlationID)
		}
		if r.traceparent != "" {
			l = l.With("traceparent", r.traceparent)
		}
		r.l = l
	}
	return r.l
}

// onControl receives every live control message.
func (w *worker) onControl(m *nats.Msg) {
	id, err := subjects.ParseControl(m.Subject)
	if err != nil || !isCancel(m.Data) {
		return
	}
	// Recorded before the requests are looked at: a pick-up registers its
	// request before it checks the record, so either sees the other.
	w.cancels.record(id)
	if w.cfg.cancelSeen != nil {
		w.cfg.cancelSeen(id)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.byID[id] {
		r.cancelled = true
		if r.stop != nil {
			r.stop(ErrCancelled)
		}
	}
}
