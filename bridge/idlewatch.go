package bridge

import (
	"context"
	"sync"
	"time"
)

// IdleWatch bounds how long a call waits for the start of its answer:
// the context WatchIdle gives ends d after the watch began, or, once the
// call's request is sent (Sent), d after that. Its cause then tells a
// request never sent (ErrIdleTimeout: a retry is safe) from one sent and
// not answered (ErrAwaitingAnswer: the upstream may be acting on it). The
// bridges' HTTP client watches every call so; an SDK's transport of its
// own (gRPC) watches its calls with one, calling Sent when its message
// is written. Safe for concurrent use.
type IdleWatch struct {
	mu      sync.Mutex
	timer   *time.Timer
	d       time.Duration
	cancel  context.CancelCauseFunc
	written bool  // Sent before the watch fired or stopped
	fired   error // the cause the watch ended the call with
	stopped bool  // Stop or End came first: it does not fire
}

// WatchIdle starts a watch of d over a call made with the context it
// returns (derived from ctx). Stop, then End, end it.
func WatchIdle(ctx context.Context, d time.Duration) (context.Context, *IdleWatch) {
	w := new(IdleWatch)
	return w.start(ctx, d), w
}

// start begins the watch w (a zero IdleWatch) of d over a call made with
// the context it returns.
func (w *IdleWatch) start(ctx context.Context, d time.Duration) context.Context {
	ctx, w.cancel = context.WithCancelCause(ctx)
	w.d = d
	w.mu.Lock()
	w.timer = time.AfterFunc(d, w.fire)
	w.mu.Unlock()
	return ctx
}

// fire ends the call's context, unless the watch stopped first:
// ErrAwaitingAnswer when its request was sent, else ErrIdleTimeout.
func (w *IdleWatch) fire() {
	w.mu.Lock()
	if w.stopped || w.fired != nil {
		w.mu.Unlock()
		return
	}
	w.fired = ErrIdleTimeout
	if w.written {
		w.fired = ErrAwaitingAnswer
	}
	cause := w.fired
	w.mu.Unlock()
	w.cancel(cause)
}

// Sent records the call's request sent whole, and gives its answer d from
// now, unless the watch has fired (the call then ends as not sent) or
// stopped.
func (w *IdleWatch) Sent() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.written && !w.stopped && w.fired == nil {
		w.written = true
		w.timer.Reset(w.d)
	}
}

// Stop ends the wait (the answer has begun): nil, or when the watch had
// already fired, the cause it ended the call's context with. The context
// lives on until End.
func (w *IdleWatch) Stop() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fired != nil {
		return w.fired
	}
	w.stopped = true
	w.timer.Stop()
	return nil
}

// End stops the watch and ends the call's context.
func (w *IdleWatch) End() {
	_ = w.Stop()
	w.cancel(nil)
}
