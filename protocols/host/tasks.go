package host

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// The task seam: A2A v0.3 and the AgentVault profile (package
// protocols/a2a) keep tasks and contexts in the host's task store under
// the ownership rule, are answered by the package's renderers over the
// host's requests (and A2A's values the package makes of their frames),
// and share /a2a with the host's A2A v1.0 handler.

// Task is the ownership record of an A2A or AgentVault task in the task
// store: a session's (who created it with which protocol, the pool
// serving it, its requests), and its context.
type Task struct {
	Session
	ContextID string
}

// Tasks keeps the tasks of the caller in the task store, where another
// principal's do not exist.
type Tasks interface {
	// Task returns the caller's task id when it may have access a to it;
	// an error both when there is none and when it is another principal's
	// (the protocol answers its not found).
	Task(ctx context.Context, id string, a tenant.Access) (*Task, error)
	// CheckTaskOpen checks that the A2A task t can take a new message: an
	// error matching [ErrTaskTerminal] when its last request has finished
	// (an interrupted one, input-required or auth-required, takes the
	// answer), [ErrBackpressure] when that cannot be read. A JSON-RPC
	// call answers it with [AnswerSubmitError].
	CheckTaskOpen(ctx context.Context, t *Task) error
	// CancelInterrupted cancels the task t whose last turn ended
	// interrupted (input-required, auth-required: nothing is running to
	// stop, and the task is not terminal) with a turn of its own that the
	// agent runtime ends canceled without calling the agent; it awaits
	// that turn's final frame and returns its request id, the task's
	// newest. egress.ErrNotCancelable when the last turn is not an
	// interrupted one.
	CancelInterrupted(ctx context.Context, t *Task) (requestID string, err error)
	// CancelRunning cancels the A2A task t's turns that have not ended
	// with cancelTurns (the protocol's cancel of a task's own turns:
	// TaskRequests.CancelTurns of them, their final frames awaited), the
	// task's record first marked so that no A2A message is appended after
	// them (one that meets the mark awaits the marked turn's end: refused
	// as to a task in a terminal state, [ErrTaskTerminal], when it ends the
	// task, appended when it ends interrupted, the cancel having stopped
	// nothing): a message checked open while a turn ran does not run after
	// the cancel, the task answered canceled then working again.
	// A turn appended before the mark is cancelled too, the record read
	// again (the caller's own, as Task reads it); so is one appended
	// before the turn read ended, which runs next: a cancel that finds
	// nothing to cancel reads the record again and goes on with it when
	// its newest request changed (one taken out of the record again,
	// refused once recorded or never published, leaves the turn before it
	// the newest). A turn listed and not stored is awaited until stored or
	// taken out of the record (egress.WithListing). It returns the task as
	// last read, its requests those cancelled, with any error: cancelTurns'
	// (egress.ErrNotCancelable when nothing was left running, or the newest
	// turn ended otherwise), the mark then taken back. A task whose newest
	// turn has finished is not marked.
	CancelRunning(ctx context.Context, t *Task, cancelTurns func(context.Context, *Task) error) (*Task, error)
	// LaterTurn is the request after the request after in the task t's
	// record as it is now ("" when there is none: no record, or after is
	// its newest); it does not wait. A stream of one of t's turns goes on
	// with it rather than end the task (a terminal state is final).
	LaterTurn(ctx context.Context, t *Task, after string) (requestID string, err error)
	// Listing is the egress.Listing of the caller's task id (its access
	// checked before, by Task): the requests its record lists now, as
	// the task store's leader holds it (a replica a write behind could
	// read a turn just appended as taken out), for a reader that awaits
	// the store of a turn it found listed (egress.WithListing): one taken
	// out of the record again (its publish failed) is awaited no longer.
	Listing(id string) egress.Listing
}

// TaskCaller is the principal a JSON-RPC transport admitted, as the
// calls of a task protocol see it.
type TaskCaller interface {
	RPCCaller
	Tasks
}

// TaskRequests gives a task protocol package the requests of its tasks
// beyond [Host]: served again, read whole, canceled.
type TaskRequests interface {
	// ServeExisting serves the frames of an existing request (a task's)
	// with a renderer of the package, as [Answerer.Serve] does, an unknown
	// request answered egress.ErrNotFound by the renderer.
	ServeExisting(w http.ResponseWriter, r *http.Request, requestID, format string, newRenderer render.NewRenderer)
	// LoadRequests reads the envelope and the stored frames of each of a
	// task's requests (egress.ErrNotFound when none is left).
	LoadRequests(ctx context.Context, ids []string) ([]egress.StoredRequest, error)
	// LoadRequestHead reads of one request what [Session.OwnRequests]
	// reads: its envelope, and its first frame only when that is gone or
	// names no user (egress.ErrNotFound when neither is stored).
	LoadRequestHead(ctx context.Context, id string) (egress.StoredRequest, error)
	// AwaitRequests waits, up to within, until each of ids (turns a
	// record lists) is stored: a turn is recorded before it is published.
	// False when one is not by then. With the record's listing in ctx
	// (egress.WithListing), a turn it lists no longer (taken out again:
	// refused once recorded, or its publish failed) is not awaited
	// further, and false.
	AwaitRequests(ctx context.Context, ids []string, within time.Duration) (bool, error)
	// UnendedTurns returns the turns of a task (ids, oldest first) that
	// have not ended, newest first (each one's last frame read).
	UnendedTurns(ctx context.Context, ids []string) ([]string, error)
	// CancelTurns cancels a task's turns (its requests, oldest first)
	// that have not ended, newest first, each with cancel, awaiting their
	// final frames (egress.ErrNotCancelable when all have finished); it
	// reports whether the newest ended canceled.
	CancelTurns(ctx context.Context, requestIDs []string, cancel egress.CancelFunc) (bool, error)
}

// OwnRequests is reqs, the stored requests of the record s
// (TaskRequests.LoadRequests of its ids), without those that are not the
// record's ([Session.Owns]; a request whose envelope left E2A_REQUESTS by
// the user_id of its frames); egress.ErrNotFound when none is left.
func (s *Session) OwnRequests(reqs []egress.StoredRequest) ([]egress.StoredRequest, error) {
	if s.Principal == "" && len(reqs) > 0 {
		return reqs, nil
	}
	var out []egress.StoredRequest
	for _, rq := range reqs {
		env := rq.Envelope
		switch {
		case (env == nil || env.UserID == "") && len(rq.Frames) > 0:
			if s.OwnsFrames(rq.Frames[0].UserID) {
				out = append(out, rq)
			}
		case env != nil && s.Owns(env):
			out = append(out, rq)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: none of the record's %d requests is its own", egress.ErrNotFound, len(reqs))
	}
	return out, nil
}

// TaskFrames reads the frames of a task's requests for the answers a
// protocol makes of them beyond a rendered stream (values, events, tasks:
// package protocols/a2a's Answers); *egress.Service is one.
type TaskFrames interface {
	TaskRequests
	// OpenReader opens a reader of requestID's frames from the resume
	// point from with the pipeline's wait limits, then opts.
	OpenReader(ctx context.Context, requestID string, from int64, opts ...egress.ReplayOption) (*egress.Reader, error)
	// OpenPrepared is OpenReader taking over the live subscription
	// prepared in ctx for requestID (egress.ExpectStream) when there is
	// one.
	OpenPrepared(ctx context.Context, requestID string, from int64, opts ...egress.ReplayOption) (*egress.Reader, error)
	// Heartbeat is the interval of a stream's keep-alives.
	Heartbeat() time.Duration
}

var _ TaskFrames = (*egress.Service)(nil)

// TaskHost is the pipeline as a task protocol package (A2A v0.3 and
// AgentVault) sees it: the [RPCHost], the frames of its tasks, and the
// JSON-RPC handler of the host's bindings, to which its endpoint hands a
// single call of another generation of the protocol.
type TaskHost interface {
	RPCHost
	// TaskFrames reads the frames of its tasks' requests.
	TaskFrames() TaskFrames
	// BindingRPC serves one JSON-RPC call over HTTP, gate included, with
	// the JSON-RPC binding of the registry's first [BindingServer] (A2A
	// v1.0's, the handler of /a2a/v1); not found when there is none.
	BindingRPC() http.Handler
}

// The front doors' publish timing. Ingress records a turn in its task's
// record before it publishes it, and a publish takes up to
// DefaultPublishTimeout (ingress.WithPublishTimeout's default).
// AwaitPublish is how long a reader that finds a turn listed but not
// stored waits for it before taking it for a publish that never came:
// that and a second (a blocking answer at its turn's end, the push stage
// at a turn's end).
const (
	DefaultPublishTimeout = 5 * time.Second
	AwaitPublish          = DefaultPublishTimeout + time.Second
)
