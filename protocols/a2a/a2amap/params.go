package a2amap

import (
	"encoding/json"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Params describes the A2A call (v1.0 or v0.3) a response answers
// (package protocols/a2a's A2AParams is this type).
type Params struct {
	// JSONRPCID is the id of the JSON-RPC request, echoed in every response
	// object (null when empty).
	JSONRPCID json.RawMessage
	// TaskID and ContextID name the task; by default the frames' task_id
	// and context_id, else the request id.
	TaskID    string
	ContextID string
	// Submitted is the time of the submitted status-update that opens a
	// message/stream (default: when the stream starts).
	Submitted time.Time
	// Resubscribe marks tasks/resubscribe: no submitted status-update.
	Resubscribe bool
	// Task is the Task an A2A v1.0 stream of the call opens with
	// (Mapper.OpeningTask), as tasks/get shows it once the call's turn is
	// recorded (BuildTask: its user message last in history); nil: the
	// mapper's task, submitted, with no history. The Aggregator of a
	// blocking answer starts from it (built with every history message:
	// HistoryLength trims the result): a Continued call's earlier turns
	// and artifacts, a new task's user message.
	Task *a2a.Task
	// Continued marks a message continuing a task that exists (the answer
	// to input-required or auth-required, any later turn): message/send's
	// answer is then always the Task (Aggregator.Result), never the
	// agent's direct Message, which answers only a message that created no
	// task; and its stream stays the task's (Mapper.Replied): the agent's
	// direct answer ends it as the final status-update, completed.
	Continued bool
	// TurnEnded, for the blocking answer to a turn of a task, is called
	// once, after the turn's final frame, when the answer is a Task (not
	// the agent's direct Message): it reads the task as it is then
	// (TurnEnd). The Aggregator then starts from its Prior instead of Task
	// (Continued), and answers with its Now when a later turn of the task
	// was accepted meanwhile.
	TurnEnded func() TurnEnd
	// HistoryLength keeps the last N history messages of a Task (nil: all).
	HistoryLength *int
	// AcceptedOutputModes are the client's configuration.acceptedOutputModes
	// (empty: any). Without application/json (or a wildcard or +json type)
	// among them, A2A's renderers (package protocols/a2a) drop DataParts
	// from every event and result.
	AcceptedOutputModes []string
	// Interaction is set when the client declared the trpc interaction
	// spec (message metadata interaction_spec_version, or the
	// trpc-a2a-version extension in X-A2A-Extensions). Without it the
	// answer is basic A2A: no thought parts, no function_call or
	// function_response DataParts (A2A's renderers drop them).
	Interaction bool
}

// SubmittedTime is the time of the submitted status-update a stream of
// the call opens with: p.Submitted, else now(), in UTC.
func (p Params) SubmittedTime(now func() time.Time) time.Time {
	ts := p.Submitted
	if ts.IsZero() {
		ts = now()
	}
	return ts.UTC()
}

// TurnEnd is a task read again once one of its turns has ended (the
// blocking answer to that turn, Params.TurnEnded).
type TurnEnd struct {
	// Prior is the task before the turn, as Params.Task holds it (its
	// earlier turns rebuilt from their frames, the turn's user message
	// last), read when the turn ended: a turn accepted while an earlier
	// one ran answers with that turn's reply too. Nil: Params.Task (and
	// for a task's first turn).
	Prior *a2a.Task
	// Now, when a later turn of the task was accepted before this one
	// ended, is the task as tasks/get shows it then (that turn's state,
	// submitted or working): the answer, which must not say the task
	// ended (A2A takes a terminal state as final) while a turn waits.
	Now *a2a.Task
}
