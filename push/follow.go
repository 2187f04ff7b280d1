package push

import (
	"context"

	a2a "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/option"
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

// laterTurn is the envelope of the turn r's task records after
// requestID (a stub with its id when it is not stored yet: being
// published by a writer the record's append checked), when that turn is
// r's principal's and task's; nil when there is none, another
// principal's request is stored under its id, or the stage reads no
// records (WithTaskTurns). A replica behind may answer the record's read
// without a turn recorded a moment ago: the update is then posted
// terminal, as a stream that read the record then writes it.
func (s *stage) laterTurn(ctx context.Context, r *request, requestID string) (*e2a.Envelope, error) {
	if s.o.turns == nil || r.taskID == "" {
		return nil, nil
	}
	next, err := s.o.turns.LaterTurn(ctx, r.taskID, requestID)
	if err != nil || next == "" {
		return nil, err
	}
	env, _, err := s.envelope(ctx, next)
	switch {
	case err != nil:
		return nil, err
	case env == nil:
		return &e2a.Envelope{RequestID: next}, nil
	case !owns(r.principal, r.taskID, env):
		return nil, nil
	}
	return env, nil
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
