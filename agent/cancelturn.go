package agent

import (
	"context"
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
	outcome, msg := d.callCanceller(CancelTurnTimeout, func(ctx context.Context) error { return tc.CancelTurn(ctx, d.env) },
		"the handler panicked in CancelTurn; the turn ends cancelled",
		"the handler refused the cancel turn; the turn ends cancelled")
	details := map[string]any{"handler_cancel": outcome}
	if outcome == "refused" {
		details["handler_cancel_error"] = msg
	}
	return errorFrame(e2a.ErrCodeCancelled, "the request was cancelled", false, details)
}
