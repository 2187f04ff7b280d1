package host

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// The submit seam: a front door normalizes a request, checks what only it
// can (its task exists and is open, its profile), then hands the envelope
// to the host once, with [Submitter.Submit], which does the rest in the
// pipeline's order: the stream slot, the context claim, the subscription
// to the frames, the front door's last step (Before), the turn's record
// and the publish. The front door then answers from the frames
// ([Answerer], [TaskFrames]) and calls [Submitted.Done] when its answer
// ends.

// ErrTooManyStreams: all of the caller's concurrent stream slots are
// taken (a [Submission] with Slot, or a stream slot asked for alone);
// nothing was published. Answer it with [TooManyStreams], which carries
// its wait (Retry-After: 1).
var ErrTooManyStreams = errors.New("host: too many concurrent streams for this principal")

// TooManyStreams is the refusal of [ErrTooManyStreams]: 429, retryable,
// JSON-RPC -32029 (rate limited), to be retried after a second (each
// protocol's Refuse renders the wait: Retry-After, RetryInfo).
var TooManyStreams = Refusal{Status: http.StatusTooManyRequests, Code: "too_many_streams",
	Message: "too many concurrent streams for this principal", Retryable: true, RPCCode: jsonrpc.CodeRateLimited,
	RetryAfter: time.Second}

// ErrTooManyTurns: the task or ACP session the turn continues has as many
// turns waiting behind its running turn as the pipeline allows
// (E2A_MAX_WAITING_TURNS); nothing was published. Answer it with
// [TooManyTurns]: retryable once the running turn ends.
var ErrTooManyTurns = errors.New("host: too many turns of this task or session are waiting")

// TooManyTurns is the refusal of [ErrTooManyTurns]: 429, retryable,
// JSON-RPC -32029 (rate limited), to be retried after a second, rendered
// by each protocol as [TooManyStreams] is.
var TooManyTurns = Refusal{Status: http.StatusTooManyRequests, Code: "too_many_turns",
	Message: "too many turns of this task or session are waiting for its running turn; send this one again once it has ended", Retryable: true,
	RPCCode: jsonrpc.CodeRateLimited, RetryAfter: time.Second}

// Submission is a normalized request a front door hands the host, and
// what the host does around its publish.
type Submission struct {
	// Pool is the agent pool the request goes to (the normalizer's
	// routing).
	Pool string
	// Envelope is the request.
	Envelope *e2a.Envelope
	// Turn, when set, makes the request a turn of a task or session:
	// recorded first, run after the record's earlier turn. nil: a request
	// of its own.
	Turn *Turn
	// ClaimContext claims the envelope's ContextID (one the client chose)
	// as the caller's, or checks that it is the caller's already, before
	// anything is published: another principal's is [ErrConflict], saying
	// nothing of it. Nothing is claimed when ContextID is empty.
	ClaimContext bool
	// Slot takes one of the caller's concurrent stream slots before the
	// publish, held until [Submitted.Done]: the answer is a stream.
	Slot bool
	// Prepare subscribes to the request's frames before the publish, so
	// that a new request's stream opens without reading the stored
	// frames: answer with [Submitted.Context] (egress.ExpectStream).
	Prepare bool
	// Before, when set, runs after the checks and the claim, just before
	// the record and the publish (A2A: the push configuration sent with
	// the message); its error ends the submission with nothing published,
	// returned as it is. The undo it returns, when not nil, is called when
	// the record or the publish then fails: a refused submission leaves
	// nothing of Before behind (an undo's error is logged).
	Before func(ctx context.Context) (undo func(context.Context) error, err error)
}

// Submitter submits requests on behalf of an admitted caller.
type Submitter interface {
	// Submit takes the stream slot (Slot), claims the context
	// (ClaimContext), subscribes to the frames (Prepare), runs Before,
	// then records the turn (Turn) and publishes the envelope to the pool,
	// in that order; the ownership rule applies to a duplicate. Call Done
	// on the result when the answer ends. Its errors match
	// [ErrTooManyStreams], [ErrTooManyTurns], [ErrInvalidPool], [ErrUnknownPool],
	// [ErrConflict], [ErrTooLarge] or [ErrBackpressure], or are Before's or
	// the context's; on error nothing was published, nothing is held and
	// Before's undo has run.
	Submit(ctx context.Context, s Submission) (*Submitted, error)
}

// Submitted is a request the pipeline accepted from [Submitter.Submit].
type Submitted struct {
	Accepted
	ctx  context.Context
	once sync.Once
	done func()
}

// NewSubmitted is the result of a [Submitter] (a host's, or a fake one in
// tests): acc, answered with ctx, done called once by Done.
func NewSubmitted(acc Accepted, ctx context.Context, done func()) *Submitted {
	return &Submitted{Accepted: acc, ctx: ctx, done: done}
}

// Context is the context to answer the request with: the submission's,
// carrying the subscription it prepared (Prepare).
func (s *Submitted) Context() context.Context { return s.ctx }

// Answering is r as the submission's answer reads it, with the
// submission's context (Context): without its resume point (Last-Event-ID,
// ?from=: egress.WithoutResumePoint) unless the submission is a duplicate,
// the retry of a stored request, whose stream the client resumes. A new
// request's stream starts at its first frame whatever the client sent,
// since a resume point can only name a frame of another request: a client
// that posted a streaming call again with Last-Event-ID and without its
// idempotency key (as fetch-based SSE clients do when they reconnect)
// started a new run and was answered from the frame after the one it
// named, the new run's first frames (and the A2A Task event) never sent.
// A malformed resume point is kept, for the answer to refuse.
func (s *Submitted) Answering(r *http.Request) *http.Request {
	if r == nil {
		return nil
	}
	r = r.WithContext(s.ctx)
	if _, err := egress.ResumePoint(r); s.Duplicate || err != nil {
		return r // a malformed one is the client's error, answered as such
	}
	return egress.WithoutResumePoint(r)
}

// Done gives back what the submission holds (its stream slot, its
// prepared subscription when no reader took it over). Call it when the
// answer ends; later calls do nothing.
func (s *Submitted) Done() {
	if s == nil || s.done == nil {
		return
	}
	s.once.Do(s.done)
}

// HeaderWarning is the response header of an accepted request's
// [Accepted].Warning (the pool has no live worker right now).
const HeaderWarning = "E2A-Warning"

// ReplySubmitted ends a JSON-RPC call's submission: on err it answers rep
// with [AnswerSubmitError] and returns false; else it sets the accepted
// request's warning on rep's headers and returns true.
func ReplySubmitted(rep Reply, s *Submitted, err error) bool {
	if err != nil {
		AnswerSubmitError(rep, err)
		return false
	}
	if s.Warning != "" {
		rep.Header().Set(HeaderWarning, s.Warning)
	}
	return true
}

// AnswerSubmitError answers an error of [Submitter.Submit] (or of a check
// before it, [TaskStore.CheckTaskOpen]) on a JSON-RPC call, in the
// pipeline's JSON-RPC errors: nothing for a caller that went away (on
// stdio a cancelled call answers -32800 itself), -32602 for an invalid or
// unknown pool and for an id or context in use (a conflict that says
// nothing of the other's), 413 for a request too large, -32004 for a task
// in a terminal state, 429 with Retry-After for the stream slots and the
// turns waiting on a task or session (-32029), and 503
// with Retry-After (retry later) for the rest.
func AnswerSubmitError(rep Reply, err error) {
	switch {
	case errors.Is(err, context.Canceled):
	case errors.Is(err, ErrInvalidPool), errors.Is(err, ErrUnknownPool):
		rep.Error(jsonrpc.InvalidParams(egress.ClientMessage(err)))
	case errors.Is(err, ErrTooLarge):
		// Never publishable as it is: 413, as a body too large, with the id.
		rep.Refuse(Refusal{Status: http.StatusRequestEntityTooLarge, RPCCode: jsonrpc.CodeInvalidRequest, Message: "Invalid Request: " + egress.ClientMessage(err),
			Data: map[string]any{"code": "body_too_large", "retryable": false}})
	case errors.Is(err, ErrTaskTerminal):
		rep.Error(&jsonrpc.Error{Code: jsonrpc.CodeA2AUnsupportedOperation, Message: "This operation is not supported: " + egress.ClientMessage(err)})
	case errors.Is(err, ErrTurnConflict):
		rep.Error(&jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: " + egress.ClientMessage(err),
			Data: map[string]any{"conflict": true, "retryable": false}})
	case errors.Is(err, ErrConflict):
		rep.Error(&jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: the id (Idempotency-Key or contextId) is already in use; choose another",
			Data: map[string]any{"conflict": true, "retryable": false}})
	case errors.Is(err, ErrTooManyStreams):
		rep.Refuse(TooManyStreams)
	case errors.Is(err, ErrTooManyTurns):
		rep.Refuse(TooManyTurns)
	default:
		rep.Refuse(Refusal{Status: http.StatusServiceUnavailable, RPCCode: jsonrpc.CodeInternalError,
			Message: "the pipeline could not accept the request; retry later", Data: map[string]any{"retryable": true},
			RetryAfter: time.Second})
	}
}
