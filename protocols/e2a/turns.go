package e2a

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// admitTurn returns the turn env is (nil: a request of its own), checked
// before anything is published; it answered w when ok is false.
//
// A task_id makes the request a turn of that task, whatever protocol
// started it: recorded on the task and run after its earlier turn
// (host.Turn). A task id not known yet is a new task of the caller's,
// created by this first turn (as a client-chosen A2A context id is
// claimed): the append that records it refuses it, as another
// principal's, should one make that task meanwhile. The task of another
// principal is refused 409 conflict, the answer to a request_id of
// another principal: since an unknown id is accepted, a 404 would say
// just as much (that the id is taken) and claim what is not so; 409 says
// only that, nothing of the task. An A2A task that has finished is
// refused 409 task_terminal, as A2A refuses a message to it (a terminal
// A2A task takes no more messages), but for a retry of a turn the task
// holds already (its request_id on the record), answered as the
// duplicate it is; a task E2A or AgentVault started
// takes more turns once its last one ended, as AgentVault's do. A message
// naming no context_id joins the task's context; one naming another
// context than the one the task's record holds is refused 400
// invalid_request (A2A's doors: -32602), but for the retry of a turn the
// task holds already (answered as its duplicate). A task E2A starts
// records its first turn's context_id; a task whose record holds none
// (its first turn named none) takes the one a later turn names. Either
// is claimed for the caller as a new task's context (host.Turn.NewContext:
// another principal's is refused 409 conflict) and holds the task's later
// turns to it.
//
// A session_id that names an ACP session (a record ACP's session/new
// made) makes the request a turn of that session when it names no task,
// and is refused 409 conflict when the session is another principal's;
// any other session_id is E2A's own label, with no record: the requests
// of an E2A session are not ordered.
func admitTurn(ctx context.Context, w http.ResponseWriter, c host.Caller, env *e2a.Envelope, pool string) (turn *host.Turn, ok bool) {
	if env.TaskID == "" && env.SessionID == "" {
		return nil, true
	}
	if env.SessionID != "" {
		s, err := c.Record(ctx, env.SessionID, true)
		if err != nil {
			refuseTurn(w, err, "session_id")
			return nil, false
		}
		if s != nil {
			// Received: a session/cancel of the session received after
			// this request cancels it even when it is recorded after the
			// cancel's mark (host.SessionCanceler), as a session/prompt.
			turn = &host.Turn{Task: *s, Session: true, Received: time.Now()}
		}
	}
	if env.TaskID == "" {
		return turn, true
	}
	t, err := c.Record(ctx, env.TaskID, false)
	if err != nil {
		refuseTurn(w, err, "task_id")
		return nil, false
	}
	newContext := false
	if t == nil {
		// A new task, the caller's, in the context its first turn names
		// (none when it names none): recorded on the task, and claimed for
		// the caller when the request is submitted (another principal's is
		// a conflict, "context_id is already in use"), as an A2A message
		// claims its context.
		t = &host.Task{Session: host.Session{ID: env.TaskID, Protocol: normalizer.ProtocolE2A, Pool: pool}, ContextID: env.ContextID}
		newContext = env.ContextID != ""
	} else {
		// A request the task's record holds already is a retry of an
		// accepted turn (the same request_id, or Idempotency-Key): Submit
		// answers it as the duplicate it is, even once the task has
		// finished since, and publishes nothing.
		if t.Protocol == normalizer.ProtocolA2A && (env.RequestID == "" || !slices.Contains(t.RequestIDs, env.RequestID)) {
			if err := c.CheckTaskOpen(ctx, t); err != nil {
				refuseTurn(w, err, "task_id")
				return nil, false
			}
		}
		switch {
		case env.ContextID == "":
			env.ContextID = t.ContextID
		case t.ContextID == "":
			// The task has no context yet (its first turn named none, or
			// it was started before E2A recorded one): this turn's becomes
			// its context, claimed as a new task's, as A2A's doors take a
			// message naming a context for a task E2A started.
			newContext = true
		case env.ContextID != t.ContextID && (env.RequestID == "" || !slices.Contains(t.RequestIDs, env.RequestID)):
			// A turn of a task runs in the task's context, as A2A's
			// doors require of a message continuing a task (-32602): in
			// another one an agent (or a bridged upstream) would take it
			// for another conversation. The task is the caller's: the
			// message names only the fields' roles all the same.
			WriteError(w, http.StatusBadRequest, CodeInvalidRequest,
				"context_id is not the context of the task task_id names: a turn of an existing task runs in its task's context; "+
					"send it without context_id (it joins the task's), or without task_id to start a new task in that context", false)
			return nil, false
		}
	}
	turn = &host.Turn{Task: *t, NewContext: newContext}
	if newContext {
		turn.Task.ContextID = env.ContextID // recorded on the task (the record as read is left alone)
	}
	return turn, true
}

// refuseTurn answers an error of admitTurn's checks, or of the turn's
// record (Submit), of the task or session the request names (field).
func refuseTurn(w http.ResponseWriter, err error, field string) {
	switch {
	case errors.Is(err, host.ErrConflict), errors.Is(err, host.ErrSessionNotFound):
		WriteError(w, http.StatusConflict, CodeConflict, field+" is already in use; choose another", false)
	case errors.Is(err, host.ErrTaskTerminal):
		WriteError(w, http.StatusConflict, CodeTaskTerminal,
			"the task has finished and takes no more messages; send the message without task_id (a new task), with its context_id to continue the conversation", false)
	case errors.Is(err, context.Canceled):
		WriteError(w, 499, CodeClientClosed, "client went away before the request was accepted", true)
	default:
		Refuse(w, unavailable)
	}
}
