package agent

import (
	"context"
	"time"
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
// stopping the cancelled ones as a live cancel does (ErrCancelled). A cancel
// published after the flush reaches the subscription.

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
// each time the mark moves past seen (checked every heartbeat), until ctx
// is done; then it closes stopped.
func (w *worker) watchMissedCancels(ctx context.Context, seen cancelMark, stopped chan<- struct{}) {
	defer close(stopped)
	c := w.cancels
	if c.nc == nil || c.sub == nil {
		return
	}
	t := time.NewTicker(w.cfg.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := w.cancelMark()
		if now == seen || !c.nc.IsConnected() {
			continue
		}
		// A reconnect or a drop after now moves the mark again: read again
		// at the next heartbeat.
		if w.rereadCancels(ctx) {
			seen = now
		}
	}
}

// rereadCancels flushes the connection, then reads the stored cancel of
// each request held and stops the cancelled ones. It reports whether the
// flush and every read succeeded.
func (w *worker) rereadCancels(ctx context.Context) bool {
	fctx, cancel := context.WithTimeout(ctx, ioTimeout)
	err := w.cancels.nc.FlushWithContext(fctx)
	cancel()
	if err != nil {
		w.log.Debug("cannot flush the connection to read missed cancels", "err", err)
		return false
	}
	w.mu.Lock()
	ids := make([]string, 0, len(w.byID))
	for id := range w.byID {
		ids = append(ids, id)
	}
	w.mu.Unlock()
	ok := true
	for _, id := range ids {
		if ctx.Err() != nil {
			return false // Run is returning
		}
		rctx, cancel := context.WithTimeout(ctx, ioTimeout)
		cancelled, err := w.storedCancel(rctx, id)
		cancel()
		if err != nil {
			w.log.Warn("cannot read the control subject of a held request", "request_id", id, "err", err)
			ok = false
			continue
		}
		if cancelled {
			w.log.Info("a cancel missed by the control subscription is stored: stopping the request", "request_id", id)
			w.cancels.record(id)
			w.stopCancelled(id)
		}
	}
	return ok
}
