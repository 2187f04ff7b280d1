package a2a

import (
	"context"
	"errors"
	"slices"

	"github.com/a2aproject/a2a-go/a2a"
	a2av1 "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// a2aCancel answers A2A tasks/cancel: the task's turns that have not
// ended cancelled (Answers.CancelTurns), the task's record marked first so
// that it takes no later message (host.Tasks.CancelRunning); when none is
// left running and the last ended interrupted (input-required,
// auth-required: not terminal), a cancel turn ends the task canceled
// (host.Tasks.CancelInterrupted). The task after either, in v0.3.
func a2aCancel(ctx context.Context, ans Answers, tc host.Tasks, t *host.Task, cancel egress.CancelFunc) (*a2a.Task, error) {
	cur, err := tc.CancelRunning(ctx, t, func(ctx context.Context, t *host.Task) error {
		_, err := ans.CancelTurns(ctx, t, cancel)
		return err
	})
	if cur != nil {
		t = cur // read again: a turn appended meanwhile was cancelled too
	}
	if err == nil {
		return v03Task(ans.A2ATaskOf(ctx, t, nil))
	}
	if !errors.Is(err, egress.ErrNotCancelable) {
		return nil, err
	}
	id, ierr := tc.CancelInterrupted(ctx, t)
	if ierr != nil {
		if errors.Is(ierr, egress.ErrNotCancelable) {
			return nil, err
		}
		return nil, ierr
	}
	after := *t
	after.RequestIDs = append(slices.Clone(t.RequestIDs), id)
	return v03Task(ans.A2ATaskOf(ctx, &after, nil))
}

// v03Task is an answer's task in A2A v0.3 (a2amap.V03Task).
func v03Task(t *a2av1.Task, err error) (*a2a.Task, error) {
	if err != nil {
		return nil, err
	}
	return a2amap.V03Task(t), nil
}

// agentVaultCancelTask is agentVaultCancel, with the cancel turn of an
// interrupted task (INPUT_REQUIRED) as a2aCancel has it. A turn listed and
// not stored is awaited until stored or taken out of the record
// (host.Tasks.Listing in ctx, egress.WithListing, as CancelRunning has
// it): one taken out since t was read (its publish failed) held the
// cancel up to the publish wait (6 s).
func agentVaultCancelTask(ctx context.Context, ans Answers, tc host.Tasks, t *host.Task, cancel egress.CancelFunc) (AgentVaultCancelResult, error) {
	ctx = egress.WithListing(ctx, tc.Listing(t.ID))
	res, err := agentVaultCancel(ctx, ans, t, cancel)
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

// v03Result is message/send's result in A2A v0.3 (a2amap.V03Result).
func v03Result(r a2av1.SendMessageResult, err error) (a2a.SendMessageResult, error) {
	if err != nil {
		return nil, err
	}
	return a2amap.V03Result(r)
}
