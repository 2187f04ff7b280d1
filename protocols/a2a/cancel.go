package a2a

import (
	"context"
	"errors"
	"slices"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// a2aCancel answers A2A tasks/cancel: the task's turns that have not
// ended cancelled (egress's A2ACancel); when none is left running and the
// last ended interrupted (input-required, auth-required: not terminal), a
// cancel turn ends the task canceled (host.Tasks.CancelInterrupted). The
// task after either.
func a2aCancel(ctx context.Context, ans Answers, tc host.Tasks, t *host.Task, cancel egress.CancelFunc) (*a2a.Task, error) {
	v, err := ans.A2ACancel(ctx, t.ID, t.ContextID, t.RequestIDs, cancel)
	if !errors.Is(err, egress.ErrNotCancelable) {
		return v, err
	}
	id, ierr := tc.CancelInterrupted(ctx, t)
	if ierr != nil {
		if errors.Is(ierr, egress.ErrNotCancelable) {
			return nil, err
		}
		return nil, ierr
	}
	return ans.A2ATask(ctx, t.ID, t.ContextID, append(slices.Clone(t.RequestIDs), id), nil)
}

// agentVaultCancelTask is agentVaultCancel, with the cancel turn of an
// interrupted task (INPUT_REQUIRED) as a2aCancel has it.
func agentVaultCancelTask(ctx context.Context, ans host.TaskFrames, tc host.Tasks, t *host.Task, cancel egress.CancelFunc) (AgentVaultCancelResult, error) {
	res, err := agentVaultCancel(ctx, ans, t.RequestIDs, cancel)
	if !errors.Is(err, egress.ErrNotCancelable) {
		return res, err
	}
	if _, ierr := tc.CancelInterrupted(ctx, t); ierr != nil {
		if errors.Is(ierr, egress.ErrNotCancelable) {
			return res, err
		}
		return res, ierr
	}
	return AgentVaultCancelResult{Success: true, Message: "Task canceled."}, nil
}
