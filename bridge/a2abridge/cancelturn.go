package a2abridge

import (
	"context"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
)

var (
	_ agent.TurnCanceller = (*Upstream)(nil)
	_ bridge.Scrubber     = (*Upstream)(nil)
)

// CancelTurn forwards the cancel of an interrupted task (a cancel turn,
// e2a.MethodCancelTurn) to the agent: when the last turn of env's task
// (its thread of the conversation) ended input-required or auth-required,
// that task's upstream task is cancelled with CancelTask; other tasks of
// the context are not touched. The cancel turn is then recorded as the
// thread's last turn (its final frame, cancelled, is not an interrupt). An agent's
// refusal (a task already terminal, not cancelable) is returned as a
// bridge.Error for the runtime to record; the turn ends cancelled anyway.
func (u *Upstream) CancelTurn(ctx context.Context, env *e2a.Envelope) error {
	conv, found, err := u.conversation(ctx, env)
	if err != nil || !found {
		return err
	}
	open, err := u.interrupted(ctx, env, conv)
	if err != nil {
		return err
	}
	var refused error
	if open {
		task := a2a.TaskID(conv.Thread(env).UpstreamTaskID)
		if err := u.cancelInterrupted(ctx, env, task); err != nil {
			refused = upstreamError(err)
			u.cfg.log.Warn("a2a bridge: the agent refused the cancel of its interrupted task", "task", task,
				"request_id", env.RequestID, "err", u.Scrub(refused.Error()))
		}
	}
	if err := u.cfg.convs.Update(ctx, u.cfg.pool, env, func(c *bridge.Conversation) {
		c.UpstreamTaskOpen = false
		c.Thread(env).UpstreamTaskOpen = false
	}); err != nil {
		u.cfg.log.Warn("a2a bridge: cancel turn not recorded", "request_id", env.RequestID, "err", err)
	}
	return refused
}

// cancelInterrupted cancels the agent's interrupted task (CancelTask). A
// failure while the agent still shows the task input-required or
// auth-required is a cancel that came as the agent's execution of the
// turn that asked was ending: a2a-go answers it with that execution's
// result (the interrupted task: not cancelable) or, when the execution
// had just closed its event queue, with an internal error ("cancelation
// failed: queue is closed"). Either way the task was not touched: the
// cancel is sent again after a short wait, up to cancelTries times in
// all. A task the agent shows in any other state refused it for good.
func (u *Upstream) cancelInterrupted(ctx context.Context, env *e2a.Envelope, task a2a.TaskID) error {
	wait := 20 * time.Millisecond
	for try := 1; ; try++ {
		_, err := u.client.CancelTask(u.serviceParams(ctx, env), &a2a.CancelTaskRequest{ID: task})
		if err == nil || ctx.Err() != nil || try == cancelTries {
			return err
		}
		t, gerr := u.client.GetTask(u.serviceParams(ctx, env), &a2a.GetTaskRequest{ID: task})
		if gerr != nil || (t.Status.State != a2a.TaskStateInputRequired && t.Status.State != a2a.TaskStateAuthRequired) {
			return err // terminal: refused for good
		}
		if sleepctx.Sleep(ctx, wait) != nil {
			return err
		}
		wait *= 2
	}
}

// cancelTries bounds the CancelTasks of an interrupted task
// (cancelInterrupted).
const cancelTries = 4
