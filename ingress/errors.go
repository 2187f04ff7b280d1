package ingress

import (
	"errors"
	"fmt"
)

// Sentinel errors of the front door.
var (
	// ErrBackpressure means JetStream refused or did not acknowledge the
	// publish in time (stream full, no quorum); the client should retry.
	ErrBackpressure = errors.New("ingress: pipeline unavailable, retry later")
	// ErrInvalidRequestID reports a request_id that cannot be accepted.
	ErrInvalidRequestID = errors.New("ingress: invalid request_id")
	// ErrInvalidPool reports an agent pool name that is not a valid token.
	ErrInvalidPool = errors.New("ingress: invalid agent pool")
	// ErrConflict means the request_id (or A2A contextId) is already taken by
	// another principal: the answer is a conflict that reveals nothing of
	// the other's request.
	ErrConflict = errors.New("ingress: id already in use by another principal")
	// ErrTooLarge means the encoded envelope (headers included) is larger
	// than the NATS server accepts (its max_payload): the request can never
	// be published as it is, so the client gets 413 (or its protocol's
	// equivalent), not retryable.
	ErrTooLarge = errors.New("ingress: request too large for the pipeline")
	// ErrUnknownPool reports an agent pool no worker ever served (no
	// durable consumer), refused when the pool check is on (WithPoolCheck).
	ErrUnknownPool = errors.New("ingress: unknown agent pool")
	// ErrTaskTerminal reports an A2A message naming a task whose last
	// request has finished (completed, failed, canceled; not one whose
	// turn was interrupted, input-required or auth-required, which the
	// message answers): a task in a terminal state accepts no more messages (A2A v0.3 §7.1, v1.0 §3.1.1;
	// a2a-go's server refuses it too). The conversation goes on in a new task of the
	// same contextId. AgentVault's tasks/send continues a task whatever its
	// state, as its profile shows.
	ErrTaskTerminal = errors.New("ingress: task is in a terminal state")
	// ErrTooManyTurns refuses a turn of a task or ACP session that has
	// as many turns waiting behind its running one as WithMaxWaitingTurns
	// allows (its record's turn that many places before the newest has no
	// final frame): nothing was written or published. Retryable, once the
	// running turn ends: each door answers it as the stream slots' refusal
	// (host.TooManyTurns: 429 with Retry-After, JSON-RPC -32029, A2A v1.0
	// RESOURCE_EXHAUSTED). A waiting turn holds its delivery in the pool's
	// MaxAckPending, so without the bound one task's queued turns could
	// take every delivery of the pool while its running turn runs.
	ErrTooManyTurns = errors.New("ingress: too many turns of this task or session are waiting for its running turn")
	// ErrInvalidRateLimits reports negative rate limits given as an option.
	ErrInvalidRateLimits = errors.New("ingress: invalid rate limits")
	// ErrInvalidOption reports an option value New refuses (WithProtocols
	// without a registry).
	ErrInvalidOption = errors.New("ingress: invalid option")
)

// workflowTurnError refuses a turn that is not a workflow execution (its
// envelope's method is not normalizer.MethodWorkflowExecute) naming as its
// task the executionId of a workflow execution of the caller's (a record
// of protocol normalizer.ProtocolWorkflow: turnCond.nonWorkflow): the
// execution takes no other message. It matches ErrConflict, each door's
// conflict answer, and its text (what egress.ClientMessage gives a client)
// names the task alone: only a principal who may write the record is told
// (appendAfter checks that first; another is ErrTaskNotFound, as for any
// task of another principal's).
type workflowTurnError struct{ id string }

func (e workflowTurnError) Error() string {
	return fmt.Sprintf("ingress: task %q is a workflow execution: it takes no other message; start a new execution", e.id)
}

func (e workflowTurnError) Unwrap() error { return errWorkflowTurn }

// poolTurnError refuses a turn of a task (or ACP session) of the caller's
// sent through the door of another pool than the one holding it
// (turnCond.pool): that pool's agent never saw the task and would run the
// turn without its history. It matches ErrConflict, each door's conflict
// answer (host.ErrTurnConflict: E2A 409 conflict, JSON-RPC -32602), and
// its text names the task and its pool: only a principal who may write
// the record is told (appendAfter checks that first).
type poolTurnError struct{ kind, id, pool string }

func (e poolTurnError) Error() string {
	what := "task"
	if e.kind == KindSession {
		what = "session"
	}
	return fmt.Sprintf("ingress: %s %q is held by pool %q: its turns go to that pool; send this one there, or naming no pool", what, e.id, e.pool)
}

func (e poolTurnError) Unwrap() error { return errPoolTurn }

// errPoolTurn is the kind of poolTurnError: an ErrConflict whose text is
// the client's (host.ErrTurnConflict).
var errPoolTurn = fmt.Errorf("%w: a task of another pool", ErrConflict)

// errWorkflowTurn is the kind of workflowTurnError: an ErrConflict whose
// text is the client's (host.ErrTurnConflict).
var errWorkflowTurn = fmt.Errorf("%w: a workflow execution's task", ErrConflict)
