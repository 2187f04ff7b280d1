package agent

import (
	"context"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
)

// Cancels missed by the control subscription. A cancel published while the
// worker's connection is down (reconnecting), or dropped by its control
// subscription (a slow consumer), never reaches onControl. The pick-ups
// after it read the stored cancel (cancelWatch), but a request already held
// (its handler running, or waiting for its turn) would run to its end. So
// at every heartbeat the worker compares the connection's reconnects and the
// subscription's dropped messages with those it last accounted for; when
// they changed, it registers the subscription again on the server (a flush:
// the client sends its subscriptions again on reconnecting, before the
// flush) and then reads the stored cancel of every request it holds,
// stopping the cancelled ones as a live cancel does (ErrCancelled).
//
// A cluster can miss one without either count moving: the flush proves the
// worker's own server has the subscription, but a cancel published through
// another server is forwarded only once that server has learnt of it over
// a route, asynchronously (milliseconds; longer while routes reconnect, and
// not at all across a partition). A request picked up in that window, or
// whose cancel is published then, would run to its end (seen in the
// three-server deploy test: a cancel published just after the agents
// started never arrived). So the stored cancel of each request held is also
// read again on a schedule of its own: one heartbeat after its pick-up,
// then after waits doubling up to maxRecheck. A request shorter than a
// heartbeat pays nothing; a long one a read per maxRecheck, against a
// heartbeat's InProgress every heartbeat.

// maxRecheck bounds the wait between two reads of a held request's stored
// cancel, and so how late a cancel the subscription missed stops it.
const maxRecheck = 15 * time.Second

// cancelMark is what the control subscription may have missed by: the
// connection's reconnects and the subscription's dropped messages.
type cancelMark struct {
	reconnects uint64
	dropped    int
}

// cancelMark reads the mark now (zero without a control subscription).
func (w *worker) cancelMark() cancelMark {
	c := w.cancels
	if c.nc == nil || c.sub == nil {
		return cancelMark{}
	}
	return cancelMark{reconnects: c.nc.Stats().Reconnects, dropped: c.subDropped()}
}

// watchMissedCancels reads the stored cancels of the requests held again
// each time the mark moves past seen (checked every heartbeat), and those
// of the requests whose scheduled re-read is due (dueRechecks), until ctx
// is done; then it closes stopped.
func (w *worker) watchMissedCancels(ctx context.Context, seen cancelMark, stopped chan<- struct{}) {
	defer close(stopped)
	c := w.cancels
	if c.nc == nil || c.sub == nil {
		return
	}
	for range sleepctx.Ticks(ctx, w.cfg.heartbeat) {
		if !c.nc.IsConnected() {
			continue
		}
		now := w.cancelMark()
		if now == seen {
			w.rereadCancels(ctx, w.dueRechecks(time.Now()))
			continue
		}
		// A reconnect or a drop after now moves the mark again: read again
		// at the next heartbeat.
		if w.flushControl(ctx) && w.rereadCancels(ctx, w.heldIDs()) {
			seen = now
		}
	}
}

// heldIDs returns the ids of the requests held.
func (w *worker) heldIDs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, 0, len(w.byID))
	for id := range w.byID {
		ids = append(ids, id)
	}
	return ids
}

// dueRechecks returns the ids of the requests held whose stored cancel is
// due to be read again at now, and schedules their next read.
func (w *worker) dueRechecks(now time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ids []string
	for id, list := range w.byID {
		due := false
		for _, r := range list {
			if now.Before(r.recheck) {
				continue
			}
			due = true
			r.recheckStep = min(2*r.recheckStep, maxRecheck)
			r.recheck = now.Add(r.recheckStep)
		}
		if due {
			ids = append(ids, id)
		}
	}
	return ids
}

// flushControl registers the control subscription on the server again. It
// reports whether the flush succeeded.
func (w *worker) flushControl(ctx context.Context) bool {
	fctx, cancel := context.WithTimeout(ctx, ioTimeout)
	defer cancel()
	if err := w.cancels.nc.FlushWithContext(fctx); err != nil {
		w.log.Debug("cannot flush the connection to read missed cancels", "err", err)
		return false
	}
	return true
}

// rereadCancels reads the stored cancel of each request ids names and
// stops the cancelled ones. It reports whether every read succeeded.
func (w *worker) rereadCancels(ctx context.Context, ids []string) bool {
	ok := true
	for _, id := range ids {
		if ctx.Err() != nil {
			return false // Run is returning
		}
		if err := w.rereadCancel(ctx, id); err != nil {
			w.log.Warn("cannot read the control subject of a held request", "request_id", id, "err", err)
			ok = false
		}
	}
	return ok
}

// rereadCancel reads the stored cancel of the held request id and stops
// it (every delivery of id held) when there is one.
func (w *worker) rereadCancel(ctx context.Context, id string) error {
	rctx, cancel := context.WithTimeout(ctx, ioTimeout)
	at, found, err := w.storedCancel(rctx, id)
	cancel()
	if err != nil || !found {
		return err
	}
	// Recorded with its stored time, which tells later pick-ups of id
	// whether it can be theirs. A held request stored after it
	// (cancelWatch.stale) runs on: the cancel is an earlier request's
	// under the same id.
	w.cancels.recordAt(id, at)
	stopped, stale := w.stopCancelledAt(id, at)
	if stopped > 0 {
		w.log.Info("a cancel missed by the control subscription is stored: stopping the request", "request_id", id)
	}
	if stale > 0 {
		logStaleCancel(w.log.With("request_id", id), "re-read")
	}
	return nil
}
