package agent

import (
	"context"
	"errors"
	"runtime/debug"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// TurnCanceller is implemented by a handler that wants to be told of a
// cancel turn (e2a.MethodCancelTurn: the cancel of a task whose last turn
// ended input-required or auth-required, which has nothing running to
// stop). The runtime calls CancelTurn once, with the cancel turn's
// envelope (its task and context ids, its principal) and a context bounded
// by CancelTurnTimeout, then ends the turn cancelled as it does for any
// handler: the handler's Serve is never called for it. An error (an agent
// that refuses or cannot be reached) does not change that end; it is
// logged and recorded in the final e2a.error's details
// ("handler_cancel": "refused", "handler_cancel_error": its message).
// A panic in CancelTurn does not either: it is recovered, logged with its
// stack and recorded as "handler_cancel": "panicked" (the process keeps
// serving).
// A bridge uses it to cancel its upstream's interrupted task.
type TurnCanceller interface {
	CancelTurn(ctx context.Context, env *e2a.Envelope) error
}

// CancelTurnTimeout bounds a TurnCanceller's CancelTurn call.
const CancelTurnTimeout = 5 * time.Second

// cancelTurnFrame is the final frame of a cancel turn: e2a.error cancelled,
// after telling a TurnCanceller handler, with the outcome of that call in
// its details.
func (w *worker) cancelTurnFrame(d *delivery) frame {
	tc, ok := w.h.(TurnCanceller)
	if !ok {
		return cancelFrame()
	}
	ctx, stop := context.WithTimeout(d.spanCtx, CancelTurnTimeout)
	defer stop()
	details := map[string]any{"handler_cancel": "done"}
	if err := callCancelTurn(ctx, tc, d.env); err != nil {
		var pe *panicError
		if errors.As(err, &pe) {
			d.log.get().Error("the handler panicked in CancelTurn; the turn ends cancelled", "panic", pe.value, "stack", string(pe.stack))
			details = map[string]any{"handler_cancel": "panicked"}
		} else {
			msg := err.Error()
			if len(msg) > maxErrorMessage {
				msg = msg[:maxErrorMessage] + "…"
			}
			d.log.get().Warn("the handler refused the cancel turn; the turn ends cancelled", "err", msg)
			details = map[string]any{"handler_cancel": "refused", "handler_cancel_error": msg}
		}
	}
	return errorFrame(e2a.ErrCodeCancelled, "the request was cancelled", false, details)
}

// callCancelTurn calls tc.CancelTurn, turning a panic into a *panicError:
// it runs on the delivery's goroutine, where an unrecovered panic would end
// the process (and every worker the cancel turn is redelivered to).
func callCancelTurn(ctx context.Context, tc TurnCanceller, env *e2a.Envelope) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	return tc.CancelTurn(ctx, env)
}
