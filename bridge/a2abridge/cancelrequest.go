package a2abridge

import (
	"context"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
)

var _ agent.RequestCanceller = (*Upstream)(nil)

// CancelRequest forwards the cancel of a request cancelled while no worker
// held it (its worker died mid-task; the worker taking it over found it
// cancelled, or past its deadline: agent.RequestCanceller) to the agent: the upstream task the
// request recorded (its thread's Tasks) is cancelled with CancelTask,
// bounded by agent.CancelRequestTimeout, as a cancel reaching a running
// Call is. A request that recorded no task (none started, or a direct
// answer) has nothing to cancel. The agent's refusal (a task it already
// ended) is returned as a bridge.Error, which the Handler scrubs and the
// runtime logs; the request ends cancelled anyway.
func (u *Upstream) CancelRequest(ctx context.Context, env *e2a.Envelope) error {
	conv, found, err := u.conversation(ctx, env)
	if err != nil || !found {
		return err
	}
	task, ok := conv.Thread(env).TaskOf(env.RequestID)
	if !ok || task == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, agent.CancelRequestTimeout)
	defer cancel()
	if _, err := u.client.CancelTask(u.serviceParams(ctx, env), &a2a.CancelTaskRequest{ID: a2a.TaskID(task)}); err != nil {
		return upstreamError(err) // logged by the runtime, scrubbed by the Handler
	}
	return nil
}
