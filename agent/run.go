package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
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

	// created is when the consumer the worker fetches from was made
	// (unix ns, the server's clock): a first delivery of a request stored
	// before it may have been answered under an earlier consumer of the
	// pool (resume, deliveredBefore).
	created atomic.Int64
	// maxFirst is the highest stream sequence the fetch loop got as a
	// first delivery: read and written by the fetch loop only (noteFirst).
	maxFirst uint64

	mu       sync.Mutex
	active   map[*request]struct{}
	byID     map[string][]*request
	wg       sync.WaitGroup
	hardStop chan struct{}
	// gos runs each request's handling and its handler on kept
	// goroutines (gopool.go); run closes it on its way out.
	gos       *goPool
	stopCause error // set by stopAll: requests picked up later stop at once
	// draining is set once Run drains (handBackWaiting): a turn waiting
	// for the turn before it is handed back then, not run; guarded by mu.
	draining bool
	// advisories counts the closes the max-deliveries advisory started
	// (onMaxDeliveries), which Run waits for once advisoriesJoined is set
	// (joinAdvisories); guarded by mu.
	advisories       sync.WaitGroup
	advisoriesJoined bool

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
	slot      *slot     // the fetch loop's slot it holds
	stored    time.Time // when its envelope was stored (JetStream's timestamp)
	cancelled bool      // a live cancel arrived before stop was set
	// ownDeadline: its deadline is the envelope's own (delivery's), so its
	// deadline_exceeded is not retryable.
	ownDeadline bool
	// waiting: its handler not run, it waits for the turns before it
	// (waitTurn, holdUnrun); guarded by worker.mu.
	waiting bool
	// recheck is when its stored cancel is read again, recheckStep the
	// wait after that read (missed.go); both guarded by worker.mu.
	recheck     time.Time
	recheckStep time.Duration
}

// Run serves agent pool pool with handler h on nc until ctx is done. It
// provisions the pool's durable pull consumer (agent-<pool> on E2A_REQUESTS,
// see WithProvisionConsumer), pulls requests only for free slots
// (WithConcurrency), sends InProgress for every request it holds, listens to
// cancels and to the consumer's max-deliveries advisory, and writes every
// frame fenced (see Writer). A consumer deleted under it is made again
// with the same configuration (rebind.go).
//
// When ctx is done Run stops pulling, hands back at once the later turns
// of a task or session still waiting for the turn before them (their
// handlers have not run: another worker takes them), waits up to the drain
// timeout for the other in-flight requests, hands those left back to the
// pool (Nak, their handlers' contexts cancelled with ErrShutdown) and
// returns nil. It returns an error
// when the options are invalid, the consumer cannot be made, or the
// connection is closed under it. Run returns once the closes a
// max-deliveries advisory started, and its cancel watch's read of the
// requests stream (cancels.go), have ended too.
func Run(ctx context.Context, nc *nats.Conn, pool string, h Handler, opts ...Option) error {
	w, err := newWorker(nc, pool, h, opts)
	if err != nil {
		return err
	}
	return w.run(ctx)
}

// newWorker is the worker Run runs.
func newWorker(nc *nats.Conn, pool string, h Handler, opts []Option) (*worker, error) {
	if f, ok := h.(HandlerFunc); nc == nil || h == nil || ok && f == nil {
		return nil, fmt.Errorf("%w: nil connection or handler", ErrInvalidOption)
	}
	cfg, err := configOf(opts)
	if err != nil {
		return nil, err
	}
	if cfg.workerID == "" {
		cfg.workerID = uuid.NewString()
	}
	consumerName, err := streams.AgentConsumerName(pool)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.registerer)
	if err != nil {
		return nil, fmt.Errorf("agent: metrics: %w", err)
	}
	// Series of the pool exist from the start (at 0).
	m.inFlight.WithLabelValues(pool)
	m.frames.WithLabelValues(pool)
	m.redeliveries.WithLabelValues(pool)
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	w := &worker{
		js: js, pool: pool, consumer: consumerName, h: h, cfg: cfg, metrics: m,
		streams:  defaultStreams,
		log:      cfg.logger.With("pool", pool, "worker", cfg.workerID),
		active:   map[*request]struct{}{},
		byID:     map[string][]*request{},
		hardStop: make(chan struct{}),
		gos:      newGoPool(goPoolIdle),
		cancels:  newCancelWatch(cancelSetLimit),
	}
	w.cancels.margin = cfg.staleMargin
	w.resumable = cfg.resumable
	if r, ok := h.(Resumer); ok {
		w.resumable = r.Resumable()
	}
	return w, nil
}

func (w *worker) consumerConfig() (jetstream.ConsumerConfig, error) {
	// One delivery more than WithMaxDeliver: the give-up delivery
	// (advisory.go, giveUp).
	opts := []streams.ConsumerOption{streams.WithAckWait(w.cfg.ackWait), streams.WithMaxDeliver(w.cfg.maxDeliver + 1)}
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
	defer w.gos.close()
	cons, err := w.consumerHandle(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started
		}
		return err
	}
	// Counted from here: consumerHandle may wait long for the consumer
	// (made later by `e2a streams apply`, a cluster electing), and a set-up
	// context started before it had run out (Run failed on its flush).
	setup, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w.bound(cons.CachedInfo())
	nc := w.js.Conn()
	ctlSub, err := nc.Subscribe(subjects.AllControl, w.onControl)
	if err != nil {
		return err
	}
	defer func() { _ = ctlSub.Unsubscribe() }()
	// Run returns once the read of the anchor a pick-up started has ended.
	defer w.cancels.stop()
	advSub, err := nc.Subscribe(subjects.MaxDeliveriesAdvisory(w.streams.Requests, w.consumer), w.onMaxDeliveries)
	if err != nil {
		return err
	}
	defer func() {
		_ = advSub.Unsubscribe()
		w.joinAdvisories()
	}()
	// The subscriptions are registered before the first pick-up checks the
	// stored control message, so no cancel falls between the two.
	if err := flushSubscriptions(setup, nc); err != nil {
		return fmt.Errorf("agent: pool %s: subscribing to cancels: %w", w.pool, err)
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
	// What the control subscription missed from now on is read again for
	// the requests held (missed.go).
	mcCtx, mcStop := context.WithCancel(context.Background())
	mcStopped := make(chan struct{})
	go w.watchMissedCancels(mcCtx, w.cancelMark(), mcStopped)
	defer func() { mcStop(); <-mcStopped }()

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
	// Drain: hand back the turns that wait, wait for the other in-flight
	// requests, then hand the rest back.
	w.handBackWaiting()
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

// handBackWaiting begins the drain: every turn waiting for the turn
// before it is stopped with ErrShutdown (handed back to the pool), and so
// is one that begins to wait from now on (setWaiting). Such a turn has
// not started: kept, it would hold this worker's drain until the turn
// before it ended (which may run on another worker, for longer than the
// drain), then start its handler in a worker that is stopping.
func (w *worker) handBackWaiting() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.draining = true
	n := 0
	for r := range w.active {
		if r.waiting && r.stop != nil {
			r.stop(ErrShutdown)
			n++
		}
	}
	if n > 0 {
		w.log.Info("draining: handing back turns waiting for the turn before them", "waiting", n)
	}
}

// setWaiting marks r as waiting for the turns before it (on), or as done
// waiting; it reports false, r stopped with ErrShutdown, once the worker
// drains (handBackWaiting): a turn whose wait ends then is handed back,
// not run.
func (w *worker) setWaiting(r *request, on bool) (ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r.waiting = on
	if w.draining && r.stop != nil {
		r.stop(ErrShutdown)
		return false
	}
	return true
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
	spare := newFetchSpare()
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
		spare.set(want)
		// The pull ends when ctx does: a stop no longer waits for an idle
		// pull to expire (up to the fetch wait, 1 s: every worker's stop,
		// and the end of every test with a worker). FetchContext asks the
		// server to expire the pull 10 % before the deadline (at most 1 s
		// before), so the deadline is the fetch wait and a ninth: the
		// server still expires an idle pull after the fetch wait.
		fctx, fcancel := context.WithTimeout(ctx, w.cfg.fetchWait+w.cfg.fetchWait/9)
		batch, err := cons.Fetch(want, jetstream.FetchContext(fctx))
		if err != nil {
			fcancel()
			for range spare.reset() {
				<-slots
			}
			var stop bool
			if cons, stop, err = w.fetchFailed(ctx, cons, err, w.log.Warn, "fetch failed", &backoff); stop {
				return err
			}
			continue
		}
		for m := range batch.Messages() {
			// A waiting turn may have taken this pull's slot over
			// (slot.acquire): the request then waits for one.
			held := spare.take()
			if ctx.Err() != nil {
				_ = m.Nak()
				if held {
					<-slots
				}
				continue
			}
			w.noteFirst(cons, m)
			w.wg.Add(1)
			w.gos.Go(func() {
				defer w.wg.Done()
				sl := &slot{c: slots, held: held, spare: spare}
				defer sl.release()
				if !held && !w.awaitSlot(ctx, m, sl) {
					_ = m.Nak()
					return
				}
				w.process(m, sl)
			})
		}
		fcancel()
		for range spare.reset() {
			<-slots
		}
		// Canceled: ctx is done (the loop's next turn returns).
		if ferr := batch.Error(); ferr != nil && !errors.Is(ferr, nats.ErrTimeout) && !errors.Is(ferr, context.DeadlineExceeded) && !errors.Is(ferr, context.Canceled) {
			var stop bool
			if cons, stop, err = w.fetchFailed(ctx, cons, ferr, w.log.Debug, "fetch ended", &backoff); stop {
				return err
			}
			continue
		}
		backoff = 10 * time.Millisecond
	}
}

// awaitSlot waits for a slot for the delivery m, which a pull delivered
// after a waiting turn took its slot over (slot.acquire), keeping the
// delivery with heartbeats meanwhile; false when ctx ended first.
func (w *worker) awaitSlot(ctx context.Context, m jetstream.Msg, sl *slot) bool {
	for {
		hctx, cancel := context.WithTimeout(ctx, w.cfg.heartbeat)
		ok := sl.acquire(hctx)
		cancel()
		if ok {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if !w.cfg.noHeartbeat {
			_ = m.InProgress()
		}
	}
}

// flushSubscriptions flushes nc, so that the server holds the
// subscriptions made before. A connection lost during the flush ends it
// with nats.ErrConnectionClosed though nats.go reconnects (it drops the
// flushes pending at a disconnect): it is flushed again, answered once
// the connection is back (its subscriptions sent again first), until ctx
// ends or the connection is closed for good. A worker started as its
// server went away exited with "nats: connection closed" before.
func flushSubscriptions(ctx context.Context, nc *nats.Conn) error {
	for {
		err := nc.FlushWithContext(ctx)
		if err == nil || !errors.Is(err, nats.ErrConnectionClosed) || nc.IsClosed() {
			return err
		}
	}
}

// retryFetch handles a failed fetch: stop with nats.ErrConnectionClosed
// when the connection is closed; else it logs err (msg, with log) and
// waits backoff, doubling it up to a second for the next failure, stop
// with nil when ctx ends first.
func (w *worker) retryFetch(ctx context.Context, err error, log func(string, ...any), msg string, backoff *time.Duration) (bool, error) {
	if isClosed(err) || w.js.Conn().IsClosed() {
		return true, nats.ErrConnectionClosed
	}
	log(msg, "err", err)
	if sleepctx.Sleep(ctx, *backoff) != nil {
		return true, nil
	}
	*backoff = min(*backoff*2, time.Second)
	return false, nil
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
	r.recheckStep = w.cfg.heartbeat
	r.recheck = time.Now().Add(r.recheckStep)
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
// sequence seq at time stored, was cancelled before its pick-up: from the
// cancels received live when they answer for it (cancelWatch), else from
// the stored cancel. A cancel older than the request (cancelWatch.stale)
// is an earlier request's under the same id: ignored, and logged.
func (w *worker) cancelledAtPickUp(id string, seq uint64, stored time.Time, log *reqLogger) bool {
	cancelled, covered, stale := w.cancels.checkAt(id, seq, stored)
	if !cancelled && !covered {
		var storedStale bool
		cancelled, storedStale = w.cancelStored(id, stored, log)
		stale = stale || storedStale
	}
	if stale && !cancelled {
		logStaleCancel(log.get(), "pick-up")
	}
	return cancelled
}

// logStaleCancel logs that a cancel of an earlier request under the
// request's id was ignored, found at where (pick-up, or a re-read).
func logStaleCancel(l *slog.Logger, where string) {
	l.Info("a cancel stored before the request was ignored: it is an earlier request's under the same id", "found_at", where)
}

// cancelStored reports whether a cancel for the request id, stored at time
// stored, is stored (a cancel sent before the pick-up): cancelled, or stale
// when the cancel stored is older than the request (an earlier request's).
// A read failure is logged and counts as no cancel; the live subscription
// still sees later ones.
func (w *worker) cancelStored(id string, stored time.Time, log *reqLogger) (cancelled, stale bool) {
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	at, found, err := w.storedCancel(ctx, id)
	if err != nil {
		log.get().Warn("cannot read the control subject", "err", err)
		return false, false
	}
	if found && w.cancels.stale(at, stored) {
		return false, true
	}
	return found, false
}

// storedCancel reads whether a cancel for id is stored (found), and when it
// was stored (zero when the server did not say).
func (w *worker) storedCancel(ctx context.Context, id string) (at time.Time, found bool, err error) {
	subj, err := subjects.Control(id)
	if err != nil {
		return time.Time{}, false, nil
	}
	m, err := lastMsg(ctx, w.js, w.streams.Control, subj)
	if err != nil {
		return time.Time{}, false, err
	}
	if m == nil || !isCancel(m.data) {
		return time.Time{}, false, nil
	}
	return m.stored, true, nil
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
	if err != nil || !isCancel(m.Data) || (w.cfg.missControl != nil && w.cfg.missControl(id)) {
		return
	}
	// Recorded before the requests are looked at: a pick-up registers its
	// request before it checks the record, so either sees the other.
	w.cancels.record(id)
	w.stopCancelled(id)
	if w.cfg.cancelSeen != nil {
		// Last: a pick-up the test lets happen after it finds the
		// subscription with nothing pending (cancelWatch.checkAt) but for
		// this callback's return, not its wait for w.mu (stopCancelled).
		w.cfg.cancelSeen(id)
	}
}

// stopCancelled stops the requests of id this worker holds: cancelled.
func (w *worker) stopCancelled(id string) {
	w.stopCancelledAt(id, time.Time{})
}

// stopCancelledAt stops the requests of id this worker holds that a cancel
// stored at at can be for (at zero: every one); it returns how many it
// stopped and how many it left, stored after the cancel (stale for them).
// One stopped already (a turn held until the turn before it ends,
// holdUnrun, is re-read for cancels too) is not counted again.
func (w *worker) stopCancelledAt(id string, at time.Time) (stopped, stale int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.byID[id] {
		if w.cancels.stale(at, r.stored) {
			stale++
			continue
		}
		if r.cancelled {
			continue
		}
		stopped++
		r.cancelled = true
		if r.stop != nil {
			r.stop(ErrCancelled)
		}
	}
	return stopped, stale
}
