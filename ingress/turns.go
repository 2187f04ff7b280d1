package ingress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// Turns of one task or session never overlap. A request that is a turn of
// an A2A or AgentVault task or of an ACP session is appended to the
// record before it is published (but the first turn of a task named by its
// request, which writes no record: TaskRecord) (a compare-and-set on the record's
// revision, so two turns accepted at once, by one replica or two, are
// appended one after the other), and published naming the request the
// record held before it (subjects.HeaderAfterRequest, with the turns
// before that one: subjects.HeaderEarlierRequests): two concurrent
// turns form a chain, each naming the one before, never both the same
// one. The agent runtime starts a turn once the turn it names has its
// final frame (agent/turns.go). A publish that fails takes the request out
// of the record again, in the background when that fails at first
// (unpublished.go).

// removeTimeout bounds the removal of a turn whose publish failed (the
// call's context may be the reason it failed).
const removeTimeout = 5 * time.Second

// publishTurn is publish for a turn of the record of: the request is
// appended to the record, then published after the record's previous
// request. A record that cannot be written is ErrBackpressure (nothing is
// published); the publish metric observes the publish alone. A request id
// the client chose (origin) is looked up before the record is written: one
// of another principal's is ErrConflict with nothing written, so the
// caller's task never lists, even for a moment, a request it may not read.
// The turn's conversation owner (turnOwner) is written in the envelope for
// the agents (publishAfter); contextOwner is the context claim's ("" when
// none was made). An A2A message is not appended after the task's cancel
// turn (ErrTaskTerminal): the task is canceled from that turn's append on,
// while the terminal-task check (taskOpen), which reads the frames, finds
// the cancel turn running until its final frame is stored; one that meets
// the mark of a running turn tasks/cancel is cancelling awaits that turn's
// end, and is refused or appended as it ends (appendPastMark). A turn of an
// ACP session received before a session/cancel whose mark its append
// reads (TaskRecord.CancelBefore) is cancelled once published
// (cancelReceivedBefore). With poolNamed (the call named the pool: a
// pool's door, ?agent=, an A2A tenant) a turn of a record another pool
// holds is refused, nothing written or published (turnCond.pool,
// poolTurnError): that pool's agent has run its turns and holds its
// history, this one's never saw it. A door naming no pool sends a turn to
// its record's pool itself. The first turn of an ACP session makes its
// pool the session's (turnCond.turnPool).
func (s *Server) publishTurn(ctx context.Context, p Principal, pool string, env *e2a.Envelope, of host.Turn, origin idOrigin, contextOwner string, poolNamed bool) (Accepted, error) {
	cond := turnCond{open: of.Task.Protocol == normalizer.ProtocolA2A, turnPool: pool}
	if poolNamed {
		cond.pool = pool
	}
	if s.opts.maxWaitingTurns > 0 {
		cond.waiting = &waitBound{max: s.opts.maxWaitingTurns, unfinished: s.turnUnfinished, ended: &s.endedTurns}
	}
	acc, err := s.publishTurnIf(ctx, p, pool, env, of, origin, contextOwner, cond)
	if errors.Is(err, ErrTooManyTurns) {
		s.metrics.turnsRefused.WithLabelValues(acceptedProtocol(env)).Inc()
	}
	return acc, err
}

// turnUnfinished reports whether requestID, a turn its record lists, has
// not ended (waitBound): it has no final frame stored (egress.Finished,
// the frames' read every reader of a task's state makes) and its request
// is stored in E2A_REQUESTS, or is not stored yet but was made by the
// pipeline (a UUIDv7 id) within host.AwaitPublish: its publish may still
// be under way, and the agent runtime will wait for it. A request no
// longer stored (aged out, or never published: the agent runtime waits
// for neither) has ended as far as the bound is concerned, so that a
// record whose older turns aged out takes turns again.
func (s *Server) turnUnfinished(ctx context.Context, requestID string) (bool, error) {
	finished, err := s.egress.Finished(ctx, requestID)
	if err != nil || finished {
		return false, err
	}
	_, _, stored, err := s.egress.Stored(ctx, requestID)
	if err != nil || stored {
		return stored, err
	}
	at, ok := egress.RequestIDTime(requestID)
	return ok && s.opts.now().Sub(at) < host.AwaitPublish, nil
}

// publishTurnIf is publishTurn; a turn of an existing record (of.Created
// false) is appended only as cond asks (TaskStore.appendAfter): its
// refusal (errRecordMoved, ErrTaskTerminal, ErrTaskNotFound for a
// record p may not write: another principal's, made since the front door
// looked, and an ErrConflict for a turn that is not a workflow execution
// naming a workflow execution's executionId: turnCond.nonWorkflow, set
// here for every such turn) is returned with nothing written or published.
func (s *Server) publishTurnIf(ctx context.Context, p Principal, pool string, env *e2a.Envelope, of host.Turn, origin idOrigin, contextOwner string, cond turnCond) (Accepted, error) {
	cond.nonWorkflow = env.Method != normalizer.MethodWorkflowExecute
	kind := KindTask
	if of.Session {
		kind = KindSession
	}
	chosenTask := false
	if of.Created && !of.Session && of.Task.ID == env.RequestID {
		// A new task named by its first request, an id the pipeline made:
		// that request is its record (TaskRecord), nothing is written
		// before it. An id the client chose (an Idempotency-Key) is
		// claimed first, by the record's create, as a task named by
		// another request is: checked, then published, another
		// principal's record of that id made between the two (an E2A
		// request naming it as its task_id, at the same moment) hid the
		// new task from its owner, both accepted.
		if origin != idChosen {
			// Nothing kept: a task of one turn is kept (keepRecord) only
			// once a push config of it is stored (pushConfigCreated).
			return s.publishTimed(ctx, p, pool, env, nil, origin, contextOwner)
		}
		chosenTask = true
	}
	if origin == idChosen {
		var err error
		if origin, err = s.checkTurnID(ctx, p, env.RequestID, of); err != nil {
			return Accepted{}, err
		}
	}
	// A retry of a turn whose publish failed here: its removal, retried,
	// must not take it out once it is published (unpublished.go).
	s.keepUnpublished(keptTurn{kind, of.Task.ID, env.RequestID})
	rec, added, err := s.recordTurn(ctx, p, kind, env, of, contextOwner, chosenTask, cond)
	if err != nil {
		return Accepted{}, err
	}
	if f := s.turnAppended.Load(); added && f != nil {
		(*f)(kind, of.Task.ID, env.RequestID)
	}
	if added && !of.Created && cond.open {
		if err := s.stillOpen(ctx, kind, rec, of.Task.ID, env.RequestID); err != nil {
			return Accepted{}, err
		}
	}
	owner := turnOwner(kind, of, rec, contextOwner)
	cancelled := added && rec.cancelledBefore(of.Received)
	if cancelled {
		// Before the publish: a worker running now has the cancel when the
		// turn reaches it and ends the turn without running it.
		s.cancelReceivedBefore(ctx, of.Task.ID, env.RequestID)
	}
	acc, err := s.publishTimed(ctx, p, pool, env, turnsBefore(rec, env.RequestID, s.unpublishedIn(kind, of.Task.ID)), origin, owner)
	if err == nil {
		st := keptState{by: p.Tenant()}
		if kind == KindTask {
			st.pushTo = turnPrincipals(env, owner)
		}
		s.keepRecord(keptTurn{kind, of.Task.ID, env.RequestID}, st)
	}
	if err == nil && cancelled {
		// And after it, for a worker started between the two, which proves
		// a turn stored after it has no cancel from the cancels it receives
		// live (agent.Cancel).
		s.cancelReceivedBefore(ctx, of.Task.ID, env.RequestID)
	}
	if err != nil && added {
		_ = s.takeOut(ctx, kind, of.Task.ID, env.RequestID, "unpublished turn")
	}
	return acc, err
}

// recordTurn writes the turn env of into its record (kind): a new one's
// create (chosenTask: a new task named by an id the client chose, whose
// record's owner is the conversation's, as firstTurnRecord reads it from
// the envelope of a task without one) or the append cond asks for, and
// reports whether the turn was added. An id another principal's record
// holds, or a record of another task of the caller's (one that lists
// requests: turnCond.fresh), is ErrConflict for a chosen task; the
// refusals publishTurnIf names and ErrTooManyTurns (turnCond.waiting)
// are returned as they are, any other failure is ErrBackpressure.
func (s *Server) recordTurn(ctx context.Context, p Principal, kind string, env *e2a.Envelope, of host.Turn, contextOwner string, chosenTask bool,
	cond turnCond) (*TaskRecord, bool, error) {
	base := TaskRecord{ID: of.Task.ID, ContextID: of.Task.ContextID, Protocol: of.Task.Protocol, Pool: of.Task.Pool, Principal: p.UserID}
	if chosenTask && contextOwner != p.UserID {
		base.Owner = contextOwner
	}
	var rec *TaskRecord
	var added bool
	var err error
	switch {
	case chosenTask:
		rec, added, err = s.opts.tasks.appendNewIf(ctx, kind, base, env.RequestID, p.Tenant(), turnCond{fresh: true, nonWorkflow: cond.nonWorkflow})
	case of.Created:
		rec, added, err = s.opts.tasks.appendNew(ctx, kind, base, env.RequestID, p.Tenant())
	default:
		rec, added, err = s.appendPastMark(ctx, kind, base, env.RequestID, p.Tenant(), cond)
	}
	switch {
	case err == nil:
		return rec, added, nil
	case chosenTask && errors.Is(err, ErrTaskNotFound):
		return nil, false, ErrConflict // another principal's record holds the id
	case errors.Is(err, context.Canceled), errors.Is(err, errRecordMoved), errors.Is(err, ErrTaskTerminal), errors.Is(err, ErrTaskNotFound),
		errors.Is(err, ErrConflict), errors.Is(err, ErrTooManyTurns),
		errors.Is(err, ErrBackpressure): // ErrBackpressure: appendPastMark's, the wait bound's
		return nil, false, err
	}
	s.opts.log.Warn("task index update failed: request refused", "kind", kind, "task_id", of.Task.ID, "request_id", env.RequestID, "err", err)
	return nil, false, fmt.Errorf("%w: task index: %v", ErrBackpressure, err)
}

// checkTurnID is checkRequestID of requestID, the id the client chose
// for a turn of the record of, which must name no request or a turn of
// that record: a stored request of the caller's (idOwnStored) the record
// lists, or whose envelope names it (its session_id or task_id: a retry
// of a turn whose publish failed, taken out of the record again). Another
// request (a prompt of another session, a turn of another task, a request
// of no task) is ErrConflict, nothing written or published: it was
// appended to this record and answered as that request's duplicate, its
// frames (another session's answer) shown as this turn's and replayed by
// session/load in this session's history, the prompt never run. A request
// whose envelope is gone is left to the publish, as before.
func (s *Server) checkTurnID(ctx context.Context, p Principal, requestID string, of host.Turn) (idOrigin, error) {
	origin, err := s.checkRequestID(ctx, p, requestID)
	if err != nil || origin != idOwnStored || slices.Contains(of.Task.RequestIDs, requestID) {
		return origin, err
	}
	rq, err := s.egress.LoadRequestHead(ctx, requestID)
	switch {
	case errors.Is(err, egress.ErrNotFound):
		return origin, nil
	case errors.Is(err, context.Canceled):
		return origin, err
	case err != nil:
		return origin, fmt.Errorf("%w: request id lookup: %v", ErrBackpressure, err)
	case rq.Envelope == nil, rq.Envelope.SessionID == of.Task.ID, rq.Envelope.TaskID == of.Task.ID:
		return origin, nil
	}
	return origin, fmt.Errorf("%w: request %q is not a turn of %s", ErrConflict, requestID, of.Task.ID)
}

// appendPastMark is TaskStore.appendAfter for a turn that may meet the
// mark of a running turn M that tasks/cancel is cancelling (markedError:
// TaskRecord.CancelMarked, set before the cancel is sent, cancelRunning).
// The cancel's outcome is not known while M runs: it stops M (the task
// canceled), or M ends otherwise before the cancel reaches it, completed
// (the task terminal) or interrupted (input-required, auth-required: the
// task open, waiting for just such an answer), and the cancel takes its
// mark back. Refused at once, as before, the turn was answered as to a
// terminal task that then took the next answer, or even went on working.
// So the turn awaits M's final frame (awaitMark), up to markWait:
//   - a final frame that ends the task (canceled, completed, failed) is
//     the task's terminal state: refused (ErrTaskTerminal), now true;
//   - one that interrupts M makes the mark void (the cancel stopped
//     nothing): appended past it (turnCond.overMark, the mark taken off),
//     and checked like any turn (stillOpen). The cancel, going on, finds
//     the turn the record's newest and cancels it (newestMoved,
//     cancelInterrupted: it is the task's running turn), or appends its
//     cancel turn first (the turn then refused: the task is canceled);
//   - a mark taken back or a record moved on (M taken out of it again,
//     never published) has the append tried again;
//   - past markWait, M still running and the mark standing, the turn is
//     ErrBackpressure: retryable, the cancel's outcome not known yet
//     (ErrTaskTerminal might be taken back by M's end).
//
// Rather than the cancel telling its waiters (it may run on another
// replica, and its caller may go), the turn reads what decides the
// outcome itself, the frames of M, as every reader of a task's state
// does. A mark of a cancel turn (not CancelMarked) refuses at once: a
// cancel turn always ends its task canceled.
func (s *Server) appendPastMark(ctx context.Context, kind string, base TaskRecord, requestID string, by tenant.Principal, cond turnCond) (*TaskRecord, bool, error) {
	var deadline time.Time
	for attempt := 0; ; attempt++ {
		rec, added, err := s.opts.tasks.appendAfter(ctx, kind, base, requestID, by, cond)
		var m markedError
		if !errors.As(err, &m) {
			return rec, added, err
		}
		if attempt >= maxUpdateAttempts {
			// Marked again and again (each cancel's mark taken back, a
			// replica a write behind): the outcome is still not known.
			return nil, false, fmt.Errorf("%w: task %s: too many concurrent cancels", ErrBackpressure, base.ID)
		}
		if f := s.markMet.Load(); f != nil {
			(*f)(base.ID, requestID, m.turn)
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(markWait)
		}
		void, err := s.awaitMark(ctx, kind, m, deadline)
		if err != nil {
			return nil, false, err
		}
		if void {
			cond.overMark = m.turn
		}
	}
}

// awaitMark awaits the end of the marked turn m.turn (appendPastMark):
// ErrTaskTerminal when its final frame ends the task; void when it
// interrupts the turn; neither (nil, false) once the mark no longer stands
// (taken back, the record moved on: the append is tried again);
// ErrBackpressure past deadline or when the frames or the record cannot
// be read. The frames are read first: a final frame stored is the
// outcome, whatever the record says.
func (s *Server) awaitMark(ctx context.Context, kind string, m markedError, deadline time.Time) (void bool, err error) {
	wctx, stop := context.WithDeadline(ctx, deadline)
	defer stop()
	wait := 2 * time.Millisecond
	for {
		finished, err := s.egress.Finished(wctx, m.turn)
		if err == nil && finished {
			var ended time.Time
			if ended, err = s.egress.EndedTaskAt(wctx, m.turn); err == nil {
				if !ended.IsZero() {
					return false, taskTerminal(m.id)
				}
				return true, nil
			}
		}
		stands := true
		if err == nil {
			stands, err = s.opts.tasks.markStands(wctx, kind, m.id, m.turn)
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if err != nil && wctx.Err() == nil {
			return false, fmt.Errorf("%w: task state: %v", ErrBackpressure, err)
		}
		if err == nil && !stands {
			return false, nil
		}
		if sleepctx.Sleep(wctx, wait) != nil {
			return false, fmt.Errorf("%w: task %s: the cancel of its running turn is under way; retry", ErrBackpressure, m.id)
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// markWait bounds appendPastMark's wait for a marked turn's end: the
// cancel's own wait for that turn's final frame (cancelTurnWait).
const markWait = cancelTurnWait

// cancelReceivedBefore cancels requestID, a turn of the session id
// published (or about to be), which a session/cancel received after the turn and handled
// before the turn was recorded did not find (TaskRecord.CancelBefore: the
// append read the cancel's mark): the turn ends cancelled as if that cancel
// had found it. It is sent before the publish and after it
// (publishTurnIf), even when the caller has gone, and its failure is
// logged: the turn then runs.
func (s *Server) cancelReceivedBefore(ctx context.Context, id, requestID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
	defer cancel()
	if err := s.cancel(ctx, requestID); err != nil {
		s.opts.log.Warn("a turn received before a cancel of its session: its cancel failed", "session_id", id, "request_id", requestID, "err", err)
	}
}

// stillOpen checks again, once the turn requestID is recorded, that the
// turn before it has not ended the task (a terminal final frame): the
// front door's check (taskOpen) read it before, and a turn ending between
// the two has its stream read the record when its final frame is stored.
// Read before this turn was recorded, the stream told its client the
// task's terminal state, which this turn would take back: refused. Read
// after, the stream follows this turn: taken. So the turn is refused when
// the turn before ended before it was recorded (by the two streams'
// clocks: the final frame's store, the record's revision). The turn
// checked is the nearest one before that is stored in E2A_REQUESTS: one
// recorded and not stored is awaited until it is stored (its publish was
// on its way: it is the turn this one runs after) or taken out of the
// record again (refused, or its publish failed: no turn, and the agent
// runtime would run this one after the turn before it), up to
// host.AwaitPublish (one never published and left in the record: skipped
// then). On ErrTaskTerminal (or a read that fails) the turn is taken out
// again and nothing is published.
func (s *Server) stillOpen(ctx context.Context, kind string, rec *TaskRecord, taskID, requestID string) error {
	err := s.endedBefore(ctx, kind, rec, taskID, requestID)
	if err == nil {
		return nil
	}
	_ = s.takeOut(ctx, kind, taskID, requestID, "refused turn")
	return err
}

// endedBefore is stillOpen's check: ErrTaskTerminal when the nearest
// stored turn before requestID ended the task before rec (its revision
// with requestID) was stored, ErrBackpressure when that cannot be read. A
// turn before it listed and not stored is awaited (stored, or taken out
// of the record: egress.Service.AwaitListed).
func (s *Server) endedBefore(ctx context.Context, kind string, rec *TaskRecord, taskID, requestID string) error {
	for _, prev := range turnsBefore(rec, requestID, s.unpublishedIn(kind, taskID)) {
		_, _, found, err := s.egress.Stored(ctx, prev)
		if err != nil {
			return fmt.Errorf("%w: task state: %v", ErrBackpressure, err)
		}
		if !found {
			// Recorded and not stored: its publish may be under way (a
			// turn is recorded before it is published), and then it is the
			// turn this one runs after, not ended: awaited until stored,
			// or taken out of the record again (refused once recorded,
			// its publish failed: no turn, skipped). Skipped at once, a
			// turn appended after the one before it ended, but while it
			// was recorded, was refused though it would run next.
			if f := s.unstoredBefore.Load(); f != nil {
				(*f)(taskID, requestID, prev)
			}
			stored, err := s.egress.AwaitListed(ctx, []string{prev}, host.AwaitPublish, s.opts.tasks.listing(kind, taskID))
			if err != nil {
				return fmt.Errorf("%w: task state: %v", ErrBackpressure, err)
			}
			if !stored {
				continue
			}
		}
		ended, err := s.egress.EndedTaskAt(ctx, prev)
		if err != nil {
			return fmt.Errorf("%w: task state: %v", ErrBackpressure, err)
		}
		if ended.IsZero() {
			return nil
		}
		if at, err := s.opts.tasks.appendedAt(ctx, kind, taskID, rec.rev); err == nil && !at.IsZero() && ended.After(at) {
			return nil // ended after this turn was recorded: its stream follows it
		}
		return taskTerminal(taskID)
	}
	return nil
}

// turnsBefore returns the turns the record rec holds before requestID,
// the nearest first: the one it runs after (subjects.HeaderAfterRequest),
// then up to subjects.MaxEarlierRequests before that one
// (subjects.HeaderEarlierRequests). The agent runtime waits for the
// nearest that is stored: a turn left in the record but never published
// (its publish failed, and so did its removal) does not let this one run
// while the turn before it still runs. The turns of skip, whose removal
// this replica retries (unpublished.go), are left out.
func turnsBefore(rec *TaskRecord, requestID string, skip map[string]bool) []string {
	i := slices.Index(rec.RequestIDs, requestID)
	if i < 1 {
		return nil
	}
	var out []string
	for j := i - 1; j >= 0 && len(out) <= subjects.MaxEarlierRequests; j-- {
		if !skip[rec.RequestIDs[j]] {
			out = append(out, rec.RequestIDs[j])
		}
	}
	return out
}

// turnOwner is the owner of the conversation a turn of the record rec
// belongs to: the record's principal (an admin's turn of another
// principal's task or session is that principal's), and for a new A2A
// task its context's owner, whose conversation the context is: the
// claim's (contextOwner; another than the task's principal for an admin's
// task in another principal's context). A later turn of a task is its
// record's principal's, whatever the context's claim says now: the claim
// is E2A_TASKS' context record, which a record of the context's tasks
// may outlive (its TTL counts from its own writes), and which another
// principal may have claimed since. It is the record's owner instead when
// the task's first turn named one (TaskRecord.Owner: an admin's task in
// another principal's context stays that principal's conversation).
func turnOwner(kind string, of host.Turn, rec *TaskRecord, contextOwner string) string {
	if kind == KindTask && of.Created {
		return cmp.Or(contextOwner, rec.Principal)
	}
	return cmp.Or(rec.Owner, rec.Principal)
}
