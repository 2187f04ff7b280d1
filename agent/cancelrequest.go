package agent

import (
	"context"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// RequestCanceller is implemented by a handler whose work may outlive the
// worker that started it (a bridge whose upstream task runs on after the
// worker died). A request cancelled before its pick-up ends cancelled
// without a Serve call; when that pick-up is a redelivery (an earlier
// delivery may have started the request: its worker died, stalled or was
// shut down), the runtime first calls CancelRequest once, with the
// request's envelope and a context bounded by CancelRequestTimeout, so that
// the handler stops what the earlier delivery started (an A2A bridge
// cancels the upstream task recorded for the request). The request then
// ends with its final e2a.error cancelled whatever CancelRequest returns:
// an error (the work already ended, the agent cannot be reached) is
// logged, a panic recovered and logged with its stack (the process keeps
// serving). A first delivery cancelled before its pick-up started nothing:
// CancelRequest is not called. A redelivery past its deadline at its
// pick-up is told the same way (the earlier delivery's work would run on
// for nobody), then ends with e2a.error deadline_exceeded. A cancel that
// reaches a running handler cancels its context instead ([ErrCancelled]).
type RequestCanceller interface {
	CancelRequest(ctx context.Context, env *e2a.Envelope) error
}

// CancelRequestTimeout bounds a RequestCanceller's CancelRequest call.
const CancelRequestTimeout = 5 * time.Second

// StopGrace bounds how long a request of a task or a session (its
// envelope's task_id or session_id) cancelled, or past its deadline, while
// its handler runs waits for the handler to return before the runtime
// writes its final frame (e2a.error cancelled or deadline_exceeded); any
// other request ends at once. A later turn of its task or session starts
// once that frame is stored, so a handler that returns within StopGrace of its
// context's end (a bridge forwarding the cancel upstream, a handler
// cleaning up) never runs beside the next turn. One that takes longer is
// logged, and the frame written: the next turn may then start while it
// runs.
const StopGrace = 5 * time.Second

// cancelRequest tells a RequestCanceller handler that d, a redelivery, was
// cancelled or past its deadline at its pick-up (see RequestCanceller); a
// first delivery is not told.
func (w *worker) cancelRequest(d *delivery) {
	rc, ok := w.h.(RequestCanceller)
	if !ok || d.meta.NumDelivered <= 1 {
		return
	}
	d.callCanceller(CancelRequestTimeout, func(ctx context.Context) error { return rc.CancelRequest(ctx, d.env) },
		"the handler panicked in CancelRequest; the request ends cancelled",
		"the handler could not cancel the request's work; the request ends cancelled")
}

// callCanceller calls cancel (a handler's CancelRequest or CancelTurn with
// d's envelope) with a context bounded by timeout, turning a panic into a
// *panicError (it runs on the delivery's goroutine, where an unrecovered
// panic would end the process). A panic is logged at Error with panicLog
// and its stack, an error at Warn with errLog and its message (bounded as
// a handler_error's). It returns how the call ended, "done", "panicked" or
// "refused", and the bounded message of a refusal.
func (d *delivery) callCanceller(timeout time.Duration, cancel func(context.Context) error, panicLog, errLog string) (outcome, msg string) {
	ctx, stop := context.WithTimeout(d.spanCtx, timeout)
	defer stop()
	err := recovered(func() error { return cancel(ctx) })
	var pe *panicError
	switch {
	case err == nil:
		return "done", ""
	case errorAs(err, &pe):
		d.log.get().Error(panicLog, "panic", pe.value, "stack", string(pe.stack))
		return "panicked", ""
	}
	msg = errorMessage(err)
	d.log.get().Warn(errLog, "err", msg)
	return "refused", msg
}
