package agent

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/subjects"
)

// Turns of one task or session run one after another. Ingress appends a
// turn to its task's (or ACP session's) record before it publishes it, and
// publishes it naming the request the record held before it
// (subjects.HeaderAfterRequest). At pick-up, a request that names one waits
// until that request's final frame is stored, then runs its handler. While
// it waits it stays registered (heartbeats keep its delivery, cancels and
// its deadline end it as they end a running handler) but gives its
// WithConcurrency slot back: a waiting turn never keeps the turn it waits
// for, nor any other request, from being pulled.

var (
	// turnGrace is how long after a turn was stored the request it names
	// may still be missing from E2A_REQUESTS: ingress appends the earlier
	// turn to the record before publishing it, so that publish may land
	// after this turn's (within ingress's publish timeout, 5 s by default).
	// Past it, a request never stored (its publish failed) or no longer
	// stored (aged out) is not waited for.
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
	c    chan struct{}
	held bool
}

// release gives the slot back (a no-op when not held).
func (s *slot) release() {
	if s != nil && s.held {
		<-s.c
		s.held = false
	}
}

// acquire takes a slot again, waiting for one to free up; false when ctx
// ended first.
func (s *slot) acquire(ctx context.Context) bool {
	if s == nil || s.held {
		return true
	}
	select {
	case s.c <- struct{}{}:
		s.held = true
		return true
	case <-ctx.Done():
		return false
	}
}

// turnAfter returns the request the turn m carries runs after: its
// HeaderAfterRequest, unless absent, outside the request-id grammar, or m's
// own id id.
func turnAfter(m jetstream.Msg, id string) string {
	h := m.Headers()
	if h == nil {
		return ""
	}
	after := h.Get(subjects.HeaderAfterRequest)
	if after == "" || after == id || subjects.ValidateRequestID(after) != nil {
		return ""
	}
	return after
}

// awaitTurn waits, before r's handler runs, until the turn after has ended
// (waitTurn). stop is false when the handler may run; otherwise r has
// ended while it waited (cancelled, past its deadline, handed back at
// shutdown) and outcome says how.
func (w *worker) awaitTurn(hctx context.Context, r *request, after string, meta *jetstream.MsgMetadata, log *reqLogger) (outcome string, stop bool) {
	if err := w.waitTurn(hctx, r, after, meta, log); err == nil {
		return "", false
	}
	return w.stopped(r, hctx, log, func() {})
}

// waitTurn returns nil once the request after has its final frame stored
// (seen live on e2a.live.<after>, or read from E2A_RESPONSES), or is known
// never to have one; the cause of ctx's end if it ends first. Most turns
// find the turn before ended at the first read, with no subscription; one
// that waits gives r's slot back until it has ended.
func (w *worker) waitTurn(ctx context.Context, r *request, after string, meta *jetstream.MsgMetadata, log *reqLogger) error {
	done, err := w.turnEnded(ctx, after, meta, log)
	if done {
		return nil
	}
	if err != nil && ctx.Err() == nil {
		log.get().Warn("cannot read the earlier turn's state: reading it again", "after_request_id", after, "err", err)
	}
	log.get().Debug("waiting for the earlier turn", "after_request_id", after)
	ended, unsubscribe := w.listenTurn(after, log)
	defer unsubscribe()
	r.slot.release()
	recheck := turnRecheckMin
	timer := time.NewTimer(recheck)
	defer timer.Stop()
	for {
		// Read at once after subscribing: a final frame stored before the
		// subscription took effect is not seen live.
		done, err := w.turnEnded(ctx, after, meta, log)
		if err != nil && ctx.Err() == nil {
			log.get().Warn("cannot read the earlier turn's state: reading it again", "after_request_id", after, "err", err)
		}
		if done {
			break
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ended:
		case <-timer.C:
			recheck = min(2*recheck, turnRecheckMax)
			timer.Reset(recheck)
			continue
		}
		break
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

// turnEnded reads whether the request after has ended: its last stored
// frame is final; or it has no frame and its delivery is acknowledged (its
// frames dropped from E2A_RESPONSES); or it is not stored at all, turnGrace
// after this turn (stored as meta says) was.
func (w *worker) turnEnded(ctx context.Context, after string, meta *jetstream.MsgMetadata, log *reqLogger) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, ioTimeout)
	defer cancel()
	respSubj, err := subjects.Response(after)
	if err != nil {
		return true, nil // not a request id: nothing to wait for
	}
	last, err := lastMsg(ctx, w.js, w.streams.Responses, respSubj)
	if err != nil {
		return false, err
	}
	if last != nil {
		h, err := last.frame()
		if err != nil {
			// Never wait on frames no reader can tell the end of.
			log.get().Warn("the earlier turn's last frame does not decode: not waiting for it", "after_request_id", after, "err", err)
			return true, nil
		}
		return h.IsFinal, nil
	}
	reqSubj, _ := subjects.RequestAnyPool(after)
	req, err := lastMsg(ctx, w.js, w.streams.Requests, reqSubj)
	if err == nil && req == nil && time.Since(meta.Timestamp) >= turnGrace {
		// A replica may lag: the stream's leader confirms the absence.
		req, err = leaderLastMsg(ctx, w.js, w.streams.Requests, reqSubj)
		if err == nil && req == nil {
			log.get().Info("the earlier turn was never stored, or no longer is: not waiting for it", "after_request_id", after)
			return true, nil
		}
	}
	if err != nil || req == nil {
		return false, err
	}
	return w.acked(ctx, req)
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
