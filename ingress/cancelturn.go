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
	"github.com/e2a-pipeline/pipeline/tenant"
)

// Cancel of an interrupted task. A task whose last turn ended
// input-required or auth-required is not terminal (A2A: those states are
// interrupted, and CancelTask moves them to canceled), but that turn's
// request has its final frame, so there is nothing running to stop, and a
// frame after a request's final frame does not exist. The cancel is a turn
// of its own: a request of the task (method e2a.MethodCancelTurn, no
// message) whose cancel is stored on its control subject before it is
// published, appended to the task's record (only while the interrupted
// turn is still its newest: cancelInterrupted) and run after the
// interrupted turn like any turn. From its append on the task takes no A2A
// message (ErrTaskTerminal: TaskRecord.CancelTurn), though the turn's final
// frame is not stored yet: an answer queued behind it would run after it,
// the task canceled, then working again. The agent runtime ends a request cancelled before
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
//
// The cancel turn is appended only while the checked turn is still the
// record's newest (publishTurnIf: a compare-and-set on the record's
// revision). A turn appended since the check (the client's answer, sent
// at the same moment) runs, and a cancel turn after it would end at its
// pick-up, the task canceled while that turn runs on: that turn is
// cancelled instead, as tasks/cancel cancels any running turn
// (cancelRunning: the record marked first), and its id returned. One
// that ended before its cancel reached it leaves the task checked again,
// and a turn appended after that one (an answer to it, or queued behind
// it) is cancelled in its turn. A newest turn read finished otherwise
// than interrupted has the record read again (read before the frames): a
// turn appended since, while that one ran, runs next and is cancelled.
func (s *Server) cancelInterrupted(ctx context.Context, p Principal, t *host.Task) (string, error) {
	ids := t.RequestIDs
	var rec *TaskRecord // the record read again once moved
	var env *e2a.Envelope
	var origin idOrigin
	moved := false // a turn was appended after the one checked
	ended := ""    // the newest turn cancelRunning found not cancelable
	for attempt := 0; attempt < maxUpdateAttempts; attempt++ {
		last := ""
		if n := len(ids); n > 0 {
			last = ids[n-1]
		}
		if last == "" {
			return "", egress.ErrNotFound
		}
		if f := s.cancelChecking.Load(); f != nil {
			(*f)(t.ID, ids)
		}
		finished, err := s.egress.Finished(ctx, last)
		if err != nil {
			return "", err
		}
		open, err := s.egress.Continuable(ctx, last)
		if err != nil {
			return "", err
		}
		switch {
		case !finished && moved:
			// The newer turn runs (or waits its turn): cancel it, as
			// tasks/cancel cancels a running turn (cancelRunning).
			if s.cancelNewerTurn != nil {
				s.cancelNewerTurn(t.ID, last)
			}
			cur := &host.Task{Session: p.session(rec), ContextID: rec.ContextID}
			after, err := s.cancelRunning(ctx, p, cur, s.cancelOwnTurns)
			if err == nil {
				return after.LastRequest(), nil
			} else if !errors.Is(err, egress.ErrNotCancelable) {
				return "", err
			}
			// It ended meanwhile (or was never published): check the task
			// again. A turn appended since (an answer to the turn that
			// ended, or queued behind it) is newer still, and runs.
			moved, ended = false, after.LastRequest()
		case !finished || !open:
			// ids were read before the frames: a turn appended since, while
			// last ran (taken: queued behind it), runs next and is the
			// cancel's. Refused, the task ran on.
			if rec, err = s.ownedRecord(ctx, p, KindTask, t.ID, tenant.Write); err != nil {
				return "", err
			}
			if rec.LastRequest() == last {
				return "", fmt.Errorf("%w: task %q", egress.ErrNotCancelable, t.ID)
			}
			ids, moved, ended = rec.RequestIDs, true, ""
			continue
		default:
			if env == nil {
				if env, origin, err = s.cancelTurn(ctx, p, t); err != nil {
					return "", err
				}
			}
			if s.cancelTurnChecked != nil {
				s.cancelTurnChecked(t.ID)
			}
			_, err := s.publishTurnIf(ctx, p, t.Pool, env, host.Turn{Task: *t}, origin, "", turnCond{after: last, cancel: true})
			if err == nil {
				if err := s.awaitCancelTurn(ctx, env.RequestID, t); err != nil {
					return "", err
				}
				return env.RequestID, nil
			}
			if !errors.Is(err, errRecordMoved) {
				return "", err
			}
			moved = true
		}
		if rec, err = s.ownedRecord(ctx, p, KindTask, t.ID, tenant.Write); err != nil {
			return "", err
		}
		ids = rec.RequestIDs
		if ended != "" && rec.LastRequest() != ended {
			moved = true
		}
	}
	return "", fmt.Errorf("%w: task %q: too many concurrent turns", ErrBackpressure, t.ID)
}

// Cancel of a running task. tasks/cancel (CancelTask) of a task whose turn
// runs cancels that turn (host.TaskRequests.CancelTurns), and the task
// ends canceled with its final frame. A message the client sent a moment
// before was checked against the running turn (taskOpen: the task is
// open) and may not be appended yet: appended after the cancelled turn it
// would run, the task answered canceled then working again. So before the
// cancel is sent the record names the running turn as the one whose
// cancel ends the task (TaskRecord.CancelTurn, CancelMarked:
// markCancelled, a compare-and-set on the record's newest request), and an
// A2A message that meets the mark awaits the marked turn's final frame
// (appendPastMark): refused once it ends the task (canceled, or completed
// before the cancel reached it), appended past the mark when it
// interrupts the turn (the task open: the cancel stopped nothing, and
// cancels the message's turn in its turn, below). Refused at once, as
// after a cancel turn, it was told the task terminal while the task went
// on. A message appended before the
// mark is the task's newest turn: it is marked and cancelled too (with
// the turns before it). A cancel that stops nothing, or whose turn ends
// otherwise than canceled (completed, or interrupted: the task takes the
// answer), takes the mark back, and reads the record again: a message
// appended before the turn it read ended (taken, stillOpen) runs next and
// is cancelled in its turn (newestMoved). A turn listed and not stored is
// awaited until stored or taken out of the record again (the record's
// egress.Listing in the cancel's context): a message refused once
// recorded (stillOpen) is listed until its removal, and a cancel that
// awaited its store held the whole publish wait. AgentVault's tasks/cancel marks nothing:
// its messages skip the terminal-task check. It carries the record's
// egress.Listing too (host.Tasks.Listing: caller.Listing), else a turn
// whose publish failed held it the whole publish wait.

// cancelRunning cancels the turns of the task t of principal p that have
// not ended with cancelTurns, its record marked first (cancel of a running
// task, above), and returns the task as last read (its requests those
// cancelled) with any error: cancelTurns', the mark taken back. A task
// whose newest request has finished is not marked. When cancelTurns finds
// nothing to cancel and the record's newest request is no longer the one
// read, the task is cancelled as the record is now (newestMoved).
func (s *Server) cancelRunning(ctx context.Context, p Principal, t *host.Task, cancelTurns func(context.Context, *host.Task) error) (*host.Task, error) {
	// A turn listed and not stored is awaited until it is stored or taken
	// out of the record again (egress.WithListing): one refused once
	// recorded (stillOpen) held the cancel up to the publish wait (6 s,
	// twice over: the earlier turns', then its own cancel's).
	ctx = egress.WithListing(ctx, s.opts.tasks.listing(KindTask, t.ID))
	for attempt := 0; attempt < maxUpdateAttempts; attempt++ {
		last := t.LastRequest()
		if last == "" {
			return t, cancelTurns(ctx, t)
		}
		finished, err := s.egress.Finished(ctx, last)
		if err != nil {
			return t, err
		}
		if finished {
			// Nothing running to mark.
			err := cancelTurns(ctx, t)
			if now := s.newestMoved(ctx, p, t, last, err); now != nil {
				t = now
				continue
			}
			return t, err
		}
		err = s.opts.tasks.markCancelled(ctx, t.ID, last, p.Tenant())
		switch {
		case err == nil:
			if f := s.cancelMarked.Load(); f != nil {
				(*f)(t.ID, last)
			}
			if err := cancelTurns(ctx, t); err != nil {
				s.unmarkCancelled(ctx, t.ID, last)
				if now := s.newestMoved(ctx, p, t, last, err); now != nil {
					t = now
					continue
				}
				return t, err
			}
			return t, nil
		case errors.Is(err, errRecordMoved):
			// A turn was appended since t was read: the record's newest.
			rec, err := s.ownedRecord(ctx, p, KindTask, t.ID, tenant.Write)
			if err != nil {
				return t, err
			}
			t = &host.Task{Session: p.session(rec), ContextID: rec.ContextID}
		case errors.Is(err, ErrTaskNotFound) || errors.Is(err, context.Canceled):
			return t, err
		default:
			return t, fmt.Errorf("%w: task index: %v", ErrBackpressure, err)
		}
	}
	return t, fmt.Errorf("%w: task %q: too many concurrent turns", ErrBackpressure, t.ID)
}

// newestMoved is the task t of principal p read again when cancelTurns
// found nothing to cancel in it (err egress.ErrNotCancelable) while its
// record's newest request is no longer last, the newest t listed: a turn
// appended before the turn last ended (queued, taken: stillOpen), which
// runs next and is the cancel's, or last taken out of the record (refused
// once recorded, or its publish failed), which leaves the turn before it
// the newest (an interrupted one takes a cancel turn). Nil otherwise, or
// when the record cannot be read.
func (s *Server) newestMoved(ctx context.Context, p Principal, t *host.Task, last string, err error) *host.Task {
	if !errors.Is(err, egress.ErrNotCancelable) {
		return nil
	}
	rec, rerr := s.ownedRecord(ctx, p, KindTask, t.ID, tenant.Write)
	if rerr != nil || rec.LastRequest() == last {
		return nil
	}
	return &host.Task{Session: p.session(rec), ContextID: rec.ContextID}
}

// unmarkCancelled takes back the mark of the request requestID of the
// task id (TaskStore.unmarkCancelled), even once ctx has ended.
func (s *Server) unmarkCancelled(ctx context.Context, id, requestID string) {
	uctx, stop := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
	defer stop()
	if err := s.opts.tasks.unmarkCancelled(uctx, id, requestID); err != nil {
		// The task takes no A2A message after requestID, which did not
		// end canceled: its next message starts a new task.
		s.opts.log.Warn("cancel mark left in the task index", "task_id", id, "request_id", requestID, "err", err)
	}
}

// cancelOwnTurns cancels the turns of the task t that have not ended, of
// its own only (protocols/a2a's Answers.CancelTurns), each with the
// front door's cancel (protocolHost.Cancel).
func (s *Server) cancelOwnTurns(ctx context.Context, t *host.Task) error {
	_, err := a2aproto.NewAnswers(s.egress).CancelTurns(ctx, t, protocolHost{s}.Cancel)
	return err
}

// cancelTurn is the envelope of a cancel turn of the task t, its cancel
// stored: the request is never picked up without it (an agent runtime that
// predates e2a.MethodCancelTurn reads that cancel at pick-up).
//
// A cancel turn whose append is refused (the answer came first:
// cancelInterrupted) is never published, and its cancel stays stored, read
// by nobody until E2A_CONTROL drops it (ControlMaxAge). It is harmless:
// its request id is a fresh one (the pipeline's UUIDv7, never returned to
// the client, nor written anywhere else), so no later request carries it
// unless a client that read E2A_CONTROL chooses it, and then only that
// client's own request ends cancelled; a later attempt of the same cancel
// publishes the same envelope, whose cancel it is. Each worker remembers
// its id among the cancels it received (agent's cancelWatch, bounded) as it
// does every cancel. Removing it would take a purge of E2A_CONTROL, which
// ingress's NATS user may not do.
func (s *Server) cancelTurn(ctx context.Context, p Principal, t *host.Task) (*e2a.Envelope, idOrigin, error) {
	fresh := &freshIDs{}
	in := s.inputFrom(http.Header{}, nil, p, t.Pool, fresh)
	params, _ := json.Marshal(map[string]string{"id": t.ID})
	in.RPC = &normalizer.RPCRequest{ID: json.RawMessage(`1`), Method: normalizer.A2ATasksCancel, Params: params}
	res, err := s.opts.norm.FromA2A(in)
	if err != nil {
		return nil, 0, err
	}
	env := res.Envelope
	env.ContextID, env.Method = t.ContextID, e2a.MethodCancelTurn
	if err := s.cancel(ctx, env.RequestID); err != nil {
		return nil, 0, fmt.Errorf("%w: cancel: %v", ErrBackpressure, err)
	}
	return env, fresh.origin(env.RequestID), nil
}

// awaitCancelTurn awaits the final frame of the cancel turn requestID of
// the task t, written at once by a worker of the pool (up to
// cancelTurnWait: past it the task is answered as it stands).
func (s *Server) awaitCancelTurn(ctx context.Context, requestID string, t *host.Task) error {
	wctx, stop := context.WithTimeout(ctx, cancelTurnWait)
	defer stop()
	if _, err := a2aproto.NewAnswers(s.egress).A2AResult(wctx, requestID, a2amap.Params{TaskID: t.ID, ContextID: t.ContextID},
		egress.WithoutRequestCheck()); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
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

// Listing is the task store's listing of the task id (TaskStore.listing:
// its leader's record).
func (c caller) Listing(id string) egress.Listing {
	return c.s.opts.tasks.listing(KindTask, id)
}

// Listing is the task store's listing of the task id (TaskStore.listing:
// its leader's record).
func (c rpcCaller) Listing(id string) egress.Listing {
	return c.s.opts.tasks.listing(KindTask, id)
}

// CancelRunning is cancelRunning for the caller.
func (c caller) CancelRunning(ctx context.Context, t *host.Task, cancelTurns func(context.Context, *host.Task) error) (*host.Task, error) {
	after, err := c.s.cancelRunning(ctx, c.p, t, cancelTurns)
	return after, hostError(err)
}

// CancelRunning is cancelRunning for the caller.
func (c rpcCaller) CancelRunning(ctx context.Context, t *host.Task, cancelTurns func(context.Context, *host.Task) error) (*host.Task, error) {
	after, err := c.s.cancelRunning(ctx, c.p, t, cancelTurns)
	return after, hostError(err)
}
