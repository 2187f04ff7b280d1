package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// Cancel of an interrupted task. A task whose last turn ended
// input-required or auth-required is not terminal (A2A: those states are
// interrupted, and CancelTask moves them to canceled), but that turn's
// request has its final frame, so there is nothing running to stop, and a
// frame after a request's final frame does not exist. The cancel is a turn
// of its own: a request of the task (method e2a.MethodCancelTurn, no
// message) whose cancel is stored on its control subject before it is
// published, appended to the task's record and run after the interrupted
// turn like any turn. The agent runtime ends a request cancelled before
// its pick-up, and any cancel turn, with its final e2a.error cancelled
// without calling the handler's Serve (a handler implementing
// agent.TurnCanceller is told of the cancel turn first: the A2A bridge
// cancels its upstream's task); every reader of the task (tasks/get, ListTasks,
// SubscribeToTask, the push stage, the audit) finds the task canceled in
// the streams, where all task state lives, and the terminal-task check
// refuses further messages. Like any cancel, it needs a worker of the pool
// to write that frame.

// cancelInterrupted cancels the interrupted task t of principal p with a
// cancel turn, awaits the turn's final frame (up to cancelTurnWait) and
// returns its request id. A task whose last request is not an
// interrupted, finished turn is egress.ErrNotCancelable.
func (s *Server) cancelInterrupted(ctx context.Context, p Principal, t *host.Task) (string, error) {
	last := ""
	if n := len(t.RequestIDs); n > 0 {
		last = t.RequestIDs[n-1]
	}
	if last == "" {
		return "", egress.ErrNotFound
	}
	finished, err := s.egress.Finished(ctx, last)
	if err != nil {
		return "", err
	}
	open, err := s.egress.Continuable(ctx, last)
	if err != nil {
		return "", err
	}
	if !finished || !open {
		return "", fmt.Errorf("%w: task %q", egress.ErrNotCancelable, t.ID)
	}
	fresh := &freshIDs{}
	in := s.inputFrom(http.Header{}, nil, p, t.Pool, fresh)
	params, _ := json.Marshal(map[string]string{"id": t.ID})
	in.RPC = &normalizer.RPCRequest{ID: json.RawMessage(`1`), Method: normalizer.A2ATasksCancel, Params: params}
	res, err := s.opts.norm.FromA2A(in)
	if err != nil {
		return "", err
	}
	env := res.Envelope
	env.ContextID, env.Method = t.ContextID, e2a.MethodCancelTurn
	// The cancel first: the request is never picked up without it.
	if err := s.cancel(ctx, env.RequestID); err != nil {
		return "", fmt.Errorf("%w: cancel: %v", ErrBackpressure, err)
	}
	if _, err := s.publishTurn(ctx, p, t.Pool, env, host.Turn{Task: *t}, fresh.origin(env.RequestID), ""); err != nil {
		return "", err
	}
	// Its final frame, written at once by a worker of the pool.
	wctx, stop := context.WithTimeout(ctx, cancelTurnWait)
	defer stop()
	if _, err := a2aproto.NewAnswers(s.egress).A2AResult(wctx, env.RequestID, a2amap.Params{TaskID: t.ID, ContextID: t.ContextID},
		egress.WithoutRequestCheck()); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return "", err
	}
	return env.RequestID, nil
}

// cancelTurnWait bounds the wait for a cancel turn's final frame (egress's
// default cancel wait); past it the task is answered as it stands.
const cancelTurnWait = 10 * time.Second

// CancelInterrupted is cancelInterrupted for the caller.
func (c caller) CancelInterrupted(ctx context.Context, t *host.Task) (string, error) {
	id, err := c.s.cancelInterrupted(ctx, c.p, t)
	return id, hostError(err)
}

// CancelInterrupted is cancelInterrupted for the caller.
func (c rpcCaller) CancelInterrupted(ctx context.Context, t *host.Task) (string, error) {
	id, err := c.s.cancelInterrupted(ctx, c.p, t)
	return id, hostError(err)
}
