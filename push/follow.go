package push

import (
	"context"
	"errors"
	"fmt"
	"time"

	a2a "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/option"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TaskTurns reads the turns of a task's record (ingress.TaskTurns: the
// records ingress keeps). LaterTurn is the request the record of A2A
// task taskID lists after the request after: "" when the task has no
// record, or after is its newest or not in it. It need not check who owns
// the turns: the stage does.
type TaskTurns interface {
	LaterTurn(ctx context.Context, taskID, after string) (string, error)
}

// WithTaskTurns makes Run read, at a turn's final frame that ends its
// task, whether the task's record lists a turn after it (t); nil is
// ErrInvalidOption. A turn queued behind the one ending takes the task
// back (turns of a task run one after another), so that update is posted
// as a turn's stream writes it: its state submitted, not terminal (A2A
// v1.0), and the Task as tasks/get answers while the next turn waits
// (v0.3: submitted, the next turn's message in history); the next turn's
// updates follow. Without it the final status is posted as the frame
// says. `e2a` passes ingress.NewTaskTurns.
func WithTaskTurns(t TaskTurns) Option {
	return option.NotNil(ErrInvalidOption, "task turns", t, func(o *options) { o.turns = t })
}

// laterTurn is the envelope of the turn r's task records after m's
// request, when the update ending that request's turn (m holds its final
// frame) is to be posted submitted: the turn is r's principal's and
// task's, and nothing of it is stored before m (a queued turn that ended
// first, cancelled or past its deadline under an agent runtime of an
// earlier build, which wrote such a turn's end at once: the running
// turn's end is then posted as its frame says).
// Nil otherwise, or when the stage reads no records (WithTaskTurns).
//
// A record that cannot be read counts as listing no later turn (as a
// turn's stream reads it): the update is posted as its frame says, with
// a warning, rather than holding the task's updates. A turn recorded but
// not stored yet (ingress records a turn, then publishes it) is waited
// for, up to host.AwaitPublish after m was stored (errBehind: m is looked
// at again), then counts as none: a publish that never came. A replica
// behind may answer the record's read without a turn recorded a moment
// ago: the update is then posted terminal, as a stream that read the
// record then writes it.
func (s *stage) laterTurn(ctx context.Context, r *request, m *message) (*e2a.Envelope, error) {
	if s.o.turns == nil || r.taskID == "" {
		return nil, nil
	}
	next, err := s.o.turns.LaterTurn(ctx, r.taskID, m.requestID)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		s.log.Warn("push: the task's record cannot be read; its turn's end is posted as its frame says",
			"request_id", m.requestID, "err", err)
		return nil, nil
	}
	if next == "" {
		return nil, nil
	}
	env, _, err := s.envelope(ctx, next)
	switch {
	case err != nil:
		return nil, err
	case env == nil && time.Since(m.stored) < host.AwaitPublish:
		return nil, fmt.Errorf("%w: turn %s recorded after %s, not stored yet", errBehind, next, m.requestID)
	case env == nil || !r.turnOf(env):
		return nil, nil
	}
	early, err := s.storedBefore(ctx, next, m.seq)
	if err != nil || early {
		return nil, err
	}
	return env, nil
}

// storedBefore reports whether request id has a message stored before
// stream sequence seq. A replica that answers with a message tells the
// truth; one that answers none may be behind (it holds a prefix of the
// stream), so the leader confirms it.
func (s *stage) storedBefore(ctx context.Context, id string, seq uint64) (bool, error) {
	subj, err := subjects.Response(id)
	if err != nil {
		return false, nil
	}
	page, _, err := streams.DirectGetBatch(ctx, s.nc, streams.ResponsesStream, subj, 1, 1)
	if err == nil {
		return page[0].Seq < seq, nil
	}
	if !errors.Is(err, streams.ErrNoMessages) {
		return false, err
	}
	first, err := streams.LeaderNextBySubject(ctx, s.nc, streams.ResponsesStream, subj, 1)
	switch {
	case errors.Is(err, streams.ErrNoMessages):
		return false, nil
	case err != nil:
		return false, err
	}
	return first.Seq < seq, nil
}

// terminalStatus is the index in evs of a status update in a terminal
// state (-1: none).
func terminalStatus(evs []a2a.Event) int {
	for i, ev := range evs {
		if su, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && su.Status.State.Terminal() {
			return i
		}
	}
	return -1
}

// followed rewrites the terminal status update evs[i] in the state
// submitted (a copy: the mapper's event is left as it is).
func followed(evs []a2a.Event, i int) {
	c := *evs[i].(*a2a.TaskStatusUpdateEvent)
	c.Status.State = a2a.TaskStateSubmitted
	evs[i] = &c
}
