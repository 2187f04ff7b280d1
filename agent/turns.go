package agent

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Turns of one task or session run one after another. Ingress appends a
// turn to its task's (or ACP session's) record before it publishes it, and
// publishes it naming the request the record held before it
// (subjects.HeaderAfterRequest), with the turns recorded before that one
// (subjects.HeaderEarlierRequests). At pick-up, a request that names one
// waits until the nearest of them that is stored has its final frame
// stored, then runs its handler: a turn recorded but never published is
// skipped for the one before it, not taken as the end of the chain. Before
// it runs it checks its cancel again (a cancel of the task or session
// cancels its turns newest first, so a queued turn's cancel is stored
// before the turn it waits for can end: cancelledBeforeRun). While
// it waits it stays registered (heartbeats keep its delivery; a cancel or
// its deadline ends it, once the turn it waits for has ended: holdUnrun)
// but gives its WithConcurrency slot back: a waiting turn never keeps the turn it waits for, nor any other
// request, from being pulled.

var (
	// turnGrace is how long after a turn was stored the request it names
	// may still be missing from E2A_REQUESTS: ingress appends the earlier
	// turn to the record before publishing it, so that publish may land
	// after this turn's (within ingress's publish timeout, 5 s by default).
	// Past it, a request never stored (its publish failed) or no longer
	// stored (aged out) is not waited for: the turn before it is, when the
	// request lists one (HeaderEarlierRequests).
	turnGrace = 15 * time.Second
	// turnRecheckMin and turnRecheckMax bound the time between two reads
	// of the earlier turn's last stored frame. The wait is on the live
	// subject (e2a.live.<id>); the reads catch a live message missed (a
	// reconnect, interest not yet propagated in a cluster), doubling from
	// the first bound to the second.
	turnRecheckMin = 250 * time.Millisecond
	turnRecheckMax = 5 * time.Second
)

// slot is the fetch loop's slot (WithConcurrency) a request goroutine
// holds. Used by that goroutine only.
type slot struct {
	c     chan struct{}
	held  bool
	spare *fetchSpare // the fetch loop's slots its pull in flight holds for no request yet
}

// release gives the slot back (a no-op when not held).
func (s *slot) release() {
	if s != nil && s.held {
		<-s.c
		s.held = false
	}
}

// acquire takes a slot again, waiting for one to free up; false when ctx
// ended first. A slot the fetch loop holds for its pull in flight and no
// request took yet is taken over (fetchSpare): the fetch loop takes every
// free slot for each pull, which waits up to the fetch wait (1 s) for
// requests, so a turn whose earlier turn ended on another worker waited
// for that pull to end before it ran (seen live: two workers of a pool,
// a task's turns alternating between them, each started 0.4-1 s after
// the one before had ended; on one worker, the earlier turn's slot freed
// at its end went to it at once).
func (s *slot) acquire(ctx context.Context) bool {
	if s == nil || s.held {
		return true
	}
	for {
		var more <-chan struct{}
		if s.spare != nil {
			more = s.spare.more()
			if s.spare.take() {
				s.held = true
				return true
			}
		}
		select {
		case s.c <- struct{}{}:
			s.held = true
			return true
		case <-more:
		case <-ctx.Done():
			return false
		}
	}
}

// fetchSpare counts the slots the fetch loop holds for its pull in flight
// that no request it delivered took yet, which a waiting turn may take
// over (slot.acquire). A request the pull then delivers without a slot
// left waits for one (worker.awaitSlot).
type fetchSpare struct {
	mu   sync.Mutex
	n    int
	wake chan struct{} // closed when n becomes positive
}

func newFetchSpare() *fetchSpare { return &fetchSpare{wake: make(chan struct{})} }

// set records the n slots a pull holds, waking the turns waiting for one.
func (f *fetchSpare) set(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n = n
	if n > 0 {
		close(f.wake)
		f.wake = make(chan struct{})
	}
}

// take takes one of the spare slots: false when none is left.
func (f *fetchSpare) take() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		return false
	}
	f.n--
	return true
}

// reset ends the pull's hold: the slots still spare, for the fetch loop
// to give back.
func (f *fetchSpare) reset() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.n
	f.n = 0
	return n
}

// more is closed once spare slots are set again.
func (f *fetchSpare) more() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wake
}

// turnChain returns the turns the turn m carries runs after, the nearest
// first: its HeaderAfterRequest, then the turns recorded before that one
// its HeaderEarlierRequests lists (at most subjects.MaxEarlierRequests);
// none when HeaderAfterRequest is absent, outside the request-id grammar,
// or m's own id id. A listed id that is m's own, a repeat, or outside the
// grammar is left out; a list that does not decode is ignored (the
// request then waits for HeaderAfterRequest's turn alone, as before the
// list existed).
func turnChain(m jetstream.Msg, id string) []string {
	h := m.Headers()
	if h == nil {
		return nil
	}
	after := h.Get(subjects.HeaderAfterRequest)
	if after == "" || after == id || subjects.ValidateRequestID(after) != nil {
		return nil
	}
	chain := []string{after}
	var earlier []string
	if v := h.Get(subjects.HeaderEarlierRequests); v == "" || json.Unmarshal([]byte(v), &earlier) != nil {
		return chain
	}
	for _, e := range earlier {
		if len(chain) > subjects.MaxEarlierRequests {
			break
		}
		if e != id && !slices.Contains(chain, e) && subjects.ValidateRequestID(e) == nil {
			chain = append(chain, e)
		}
	}
	return chain
}

// awaitTurn waits, before r's handler runs, until the turns of chain have
// ended (waitTurn). stop is false when the handler may run; otherwise r
// has ended while it waited (cancelled, past its deadline, handed back at
// shutdown) and outcome says how. A turn cancelled, or past its deadline,
// while it waits ends once the turns before it have ended (holdUnrun).
func (w *worker) awaitTurn(hctx context.Context, d *delivery, r *request, chain []string) (outcome string, stop bool) {
	if err := w.waitTurn(hctx, r, chain, d.meta, d.log); err == nil {
		return "", false
	}
	if cause := context.Cause(hctx); errors.Is(cause, ErrCancelled) || errors.Is(cause, ErrDeadlineExceeded) {
		if held := w.holdUnrun(d, r, chain); held != nil {
			return w.stopped(r, held, d.log, func(time.Duration) bool { return true }, 0)
		}
	}
	return w.stopped(r, hctx, d.log, func(time.Duration) bool { return true }, 0)
}

// holdUnrun keeps the turn r, ended before its handler ran (cancelled, or
// past its deadline), until the turns of chain have ended, so that its
// final frame is stored after theirs: the turns of a task or session end
// in the order they run, never one while a turn before it runs. A cancel
// of a task cancels its queued turns first, so that they never run; their
// ends written at once came before the end of the turn still running, and
// a reader of the task (tasks/get, its stream, its push notifications)
// took the task for canceled while that turn ran on, then saw it end
// again; a queued turn past its deadline ended the task failed under a
// running turn, and the turn queued behind it, finding the turn before
// it ended, ran alongside that one. r stays registered meanwhile (its
// delivery kept by heartbeats, a further cancel changing nothing) without
// its slot. A shutdown (from the drain's start) or a fence ends the hold:
// held is then the context whose cause says how r stops (stopped); nil
// when r is to end now, as refused.
func (w *worker) holdUnrun(d *delivery, r *request, chain []string) (held context.Context) {
	hold, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	w.mu.Lock()
	r.stop = func(cause error) {
		if !errors.Is(cause, ErrCancelled) {
			stop(cause)
		}
	}
	// Stopped already: a re-read of its stored cancel (missed.go) neither
	// counts nor logs it as a cancel the subscription missed.
	r.cancelled = true
	r.waiting = true
	stopping := w.stopCause
	if stopping == nil && w.draining {
		stopping = ErrShutdown
	}
	w.mu.Unlock()
	if stopping != nil {
		stop(stopping)
	}
	done, target, err := w.turnEnded(hold, chain, d.meta, d.log)
	if !done {
		if err != nil && hold.Err() == nil {
			d.log.get().Warn("cannot read the earlier turn's state: reading it again", "after_request_id", target, "err", err)
		}
		d.log.get().Debug("ended before it ran: its end waits for the earlier turn's", "after_request_id", target)
		r.slot.release()
		if w.cfg.turnHeld != nil {
			w.cfg.turnHeld(d.id)
		}
		if errors.Is(w.waitEarlier(hold, chain, target, d.meta, d.log, w.undelivered), errTurnJammed) {
			d.log.get().Warn("the earlier turn is not delivered while the pool's deliveries are all held: ending before it",
				"after_request_id", target)
		}
	}
	if context.Cause(hold) != nil {
		return hold
	}
	return nil
}

// errTurnJammed: the turn a held turn waits for cannot be delivered while
// it holds its own delivery (undelivered).
var errTurnJammed = errors.New("agent: the earlier turn cannot be delivered")

// undelivered reports whether the turn target, which a held turn waits
// for, is jammed behind it: stored for this pool and never delivered
// (after the last message the pool's consumer delivered), while the
// consumer has MaxAckPending deliveries unacknowledged, so that it
// delivers nothing new until one is. The held turn then ends at once
// (out of order, rather than hold the pool for good: a later turn stored
// before the earlier one, the two published by two front doors at once,
// is picked up first). A read that fails says no.
func (w *worker) undelivered(ctx context.Context, target string) bool {
	ctx, cancel := context.WithTimeout(ctx, ioTimeout)
	defer cancel()
	subj, err := subjects.Request(w.pool, target)
	if err != nil {
		return false
	}
	req, err := lastMsg(ctx, w.js, w.streams.Requests, subj)
	if err != nil || req == nil {
		return false
	}
	cons, err := w.js.Consumer(ctx, w.streams.Requests, w.consumer)
	if err != nil {
		return false
	}
	info := cons.CachedInfo()
	return req.seq > info.Delivered.Stream && info.Config.MaxAckPending > 0 && info.NumAckPending >= info.Config.MaxAckPending
}

// waitTurn returns nil once the nearest turn of chain that is stored (or
// not yet known never to be: turnEnded) has its final frame stored (seen
// live on e2a.live.<id>, or read from E2A_RESPONSES), or none of them
// has one to wait for; the cause of ctx's end if it ends first. Most turns
// find the turn before ended at the first read, with no subscription, and
// check their cancel again (cancelledBeforeRun); one that waits gives r's
// slot back until it has ended, then reads its stored cancel.
func (w *worker) waitTurn(ctx context.Context, r *request, chain []string, meta *jetstream.MsgMetadata, log *reqLogger) error {
	done, target, err := w.turnEnded(ctx, chain, meta, log)
	if done {
		if w.cancelledBeforeRun(r.id, meta, log) {
			w.stopCancelled(r.id)
			return context.Cause(ctx)
		}
		return nil
	}
	if err != nil && ctx.Err() == nil {
		log.get().Warn("cannot read the earlier turn's state: reading it again", "after_request_id", target, "err", err)
	}
	if !w.setWaiting(r, true) {
		return context.Cause(ctx)
	}
	r.slot.release()
	err = w.waitEarlier(ctx, chain, target, meta, log, nil)
	if !w.setWaiting(r, false) {
		return context.Cause(ctx)
	}
	if err != nil {
		return err
	}
	if !r.slot.acquire(ctx) {
		return context.Cause(ctx)
	}
	// A cancel the control subscription missed while r waited (published
	// while the connection was down) is read by the re-reads after the
	// reconnect; those may stop the earlier turn first, and r would run at
	// once, before its own is read. So a turn that waited reads its stored
	// cancel once before it runs.
	if err := w.rereadCancel(ctx, r.id); err != nil && ctx.Err() == nil {
		log.get().Warn("cannot read the control subject of a held request", "err", err)
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// waitEarlier waits until the turns of chain have ended, target the
// nearest that has not (turnEnded): listening to its live frames and
// reading its last one again now and then; the cause of ctx's end if it
// ends first. With stuck, errTurnJammed when stuck, asked at each read
// again, says the turn waited for cannot come.
func (w *worker) waitEarlier(ctx context.Context, chain []string, target string, meta *jetstream.MsgMetadata, log *reqLogger,
	stuck func(ctx context.Context, target string) bool) error {
	log.get().Debug("waiting for the earlier turn", "after_request_id", target)
	var l turnListener
	defer l.stop()
	recheck := turnRecheckMin
	timer := time.NewTimer(recheck)
	defer timer.Stop()
	for {
		// Listen to the turn waited for (another once the nearer one is
		// known never to be stored), then read at once: a final frame
		// stored before the subscription took effect is not seen live.
		ended := l.listen(w, target, log)
		done, next, err := w.turnEnded(ctx, chain, meta, log)
		if err != nil && ctx.Err() == nil {
			log.get().Warn("cannot read the earlier turn's state: reading it again", "after_request_id", next, "err", err)
		}
		if done {
			return nil
		}
		if next != target {
			log.get().Info("the earlier turn was never stored, or no longer is: waiting for the turn before it", "after_request_id", target, "earlier_request_id", next)
			target = next
			continue
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ended:
			return nil
		case <-timer.C:
			if stuck != nil && stuck(ctx, target) {
				return errTurnJammed
			}
			recheck = min(2*recheck, turnRecheckMax)
			timer.Reset(recheck)
		}
	}
}

// cancelledBeforeRun reports whether a cancel of the request id (stored
// as meta says) has come since its pick-up checked (cancelledAtPickUp),
// checked the same way (the stale cancels were logged by that check): for
// a turn that found the turn before it ended at its first read. That turn
// may have ended by a cancel of the session or task, sent once this
// turn's own cancel was stored (ingress cancels their turns newest
// first), after this turn's pick-up checked; the live message of this
// turn's cancel then came before the frame read that found the turn
// ended, but its callback may not have run yet: the subscription counts
// it as pending (cancelWatch.checkAt), and the stored cancel is read.
// Without this check the handler would run until that callback stopped
// it (the start of a model call the cancel was meant to prevent), or to
// its end when it is quick.
func (w *worker) cancelledBeforeRun(id string, meta *jetstream.MsgMetadata, log *reqLogger) bool {
	cancelled, covered, _ := w.cancels.checkAt(id, meta.Sequence.Stream, meta.Timestamp)
	if !cancelled && !covered {
		cancelled, _ = w.cancelStored(id, meta.Timestamp, log)
	}
	return cancelled
}

// turnListener holds the subscription to the live frames of the turn a
// waiting turn waits for (listenTurn), one at a time.
type turnListener struct {
	id          string
	ended       <-chan struct{}
	unsubscribe func()
}

// listen returns the channel closed by the final frame of the request id,
// subscribing to its frames (ending the subscription to another's) unless
// already subscribed.
func (l *turnListener) listen(w *worker, id string, log *reqLogger) <-chan struct{} {
	if l.unsubscribe != nil && l.id == id {
		return l.ended
	}
	l.stop()
	l.id = id
	l.ended, l.unsubscribe = w.listenTurn(id, log)
	return l.ended
}

// stop ends the subscription (a no-op without one).
func (l *turnListener) stop() {
	if l.unsubscribe != nil {
		l.unsubscribe()
		l.unsubscribe = nil
	}
}

// listenTurn subscribes to the live frames of the request after: ended is
// closed by its final frame. A subscription that fails is logged (the
// reads alone then end the wait).
func (w *worker) listenTurn(after string, log *reqLogger) (ended <-chan struct{}, unsubscribe func()) {
	c := make(chan struct{})
	live, err := subjects.Live(after)
	if err != nil {
		return c, func() {}
	}
	var once sync.Once
	sub, err := w.js.Conn().Subscribe(live, func(m *nats.Msg) {
		if !streams.ServerPublished(m) || m.Subject != live {
			// Not the response stream's RePublish on the live subject
			// (streams.ServerPublished): a push consumer's delivery,
			// which would start this turn while the earlier one runs.
			log.get().Warn("ignored a live frame the server did not send (a consumer's delivery)", "after_request_id", after, "reply", m.Reply)
			return
		}
		sm := storedMsg{data: m.Data, header: m.Header}
		if h, err := sm.frame(); err == nil && h.IsFinal {
			once.Do(func() { close(c) })
		}
	})
	if err != nil {
		log.get().Warn("cannot listen to the earlier turn's frames: reading them instead", "after_request_id", after, "err", err)
		return c, func() {}
	}
	return c, func() { _ = sub.Unsubscribe() }
}

// turnEnded reads whether the turns of chain (the nearest first) have
// ended: target is the nearest that is stored, or may still be (within
// turnGrace), and done says whether it has ended (turnState). A turn
// known never to be stored is skipped for the one before it, not taken
// as the end of the chain: it may sit between this turn and one still
// running. done is true with no target when none is left to wait for.
func (w *worker) turnEnded(ctx context.Context, chain []string, meta *jetstream.MsgMetadata, log *reqLogger) (done bool, target string, err error) {
	for _, id := range chain {
		st, err := w.turnState(ctx, id, meta, log)
		if err != nil {
			return false, id, err
		}
		if st != turnMissing {
			return st == turnOver, id, nil
		}
	}
	return true, "", nil
}

// The states of an earlier turn (turnState).
const (
	turnRunning = iota // not ended, or not stored yet
	turnOver           // ended
	turnMissing        // never stored, or no longer
)

// turnState reads whether the request after has ended: its last stored
// frame is final; or it has no frame and its delivery is acknowledged (its
// frames dropped from E2A_RESPONSES). turnMissing when it is not stored at
// all, turnGrace after this turn (stored as meta says) was.
func (w *worker) turnState(ctx context.Context, after string, meta *jetstream.MsgMetadata, log *reqLogger) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, ioTimeout)
	defer cancel()
	respSubj, err := subjects.Response(after)
	if err != nil {
		return turnOver, nil // not a request id: nothing to wait for
	}
	last, err := lastMsg(ctx, w.js, w.streams.Responses, respSubj)
	if err != nil {
		return turnRunning, err
	}
	if last != nil {
		h, err := last.frame()
		if err != nil {
			// Never wait on frames no reader can tell the end of.
			log.get().Warn("the earlier turn's last frame does not decode: not waiting for it", "after_request_id", after, "err", err)
			return turnOver, nil
		}
		return ternary(h.IsFinal, turnOver, turnRunning), nil
	}
	reqSubj, _ := subjects.RequestAnyPool(after)
	req, err := lastMsg(ctx, w.js, w.streams.Requests, reqSubj)
	if err == nil && req == nil && time.Since(meta.Timestamp) >= turnGrace {
		// A replica may lag: the stream's leader confirms the absence.
		req, err = leaderLastMsg(ctx, w.js, w.streams.Requests, reqSubj)
		if err == nil && req == nil {
			log.get().Debug("the earlier turn was never stored, or no longer is", "after_request_id", after)
			return turnMissing, nil
		}
	}
	if err != nil || req == nil {
		return turnRunning, err
	}
	ok, err := w.acked(ctx, req)
	return ternary(ok, turnOver, turnRunning), err
}

// ternary is a when c, else b.
func ternary[T any](c bool, a, b T) T {
	if c {
		return a
	}
	return b
}

// acked reports whether the request req (stored, without a frame) of this
// worker's pool is acknowledged: at or below the consumer's ack floor. Its
// frames were then dropped from E2A_RESPONSES (max bytes, max age) after
// its final one was written. A request of another pool is not looked up
// (false).
func (w *worker) acked(ctx context.Context, req *storedMsg) (bool, error) {
	pool, _, err := subjects.ParseRequest(req.subject)
	if err != nil || pool != w.pool {
		return false, nil
	}
	c, err := w.js.Consumer(ctx, w.streams.Requests, w.consumer)
	if err != nil {
		return false, err
	}
	return req.seq <= c.CachedInfo().AckFloor.Stream, nil
}
