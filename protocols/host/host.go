package host

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/render"
)

// Errors of [Submitter.Submit], matched with errors.Is; the error's text is
// the pipeline's own.
var (
	// ErrUnknownPool: no worker of the pool has ever started (the pool
	// check is on); nothing was published.
	ErrUnknownPool = errors.New("host: unknown agent pool")
	// ErrConflict: the request id is another principal's; the answer must
	// reveal nothing of the other's request.
	ErrConflict = errors.New("host: id already in use by another principal")
	// ErrContextConflict is the ErrConflict of a context id another
	// principal holds (it matches ErrConflict too): a front door names the
	// context's field.
	ErrContextConflict = fmt.Errorf("%w: the context id", ErrConflict)
	// ErrTurnConflict is the ErrConflict of a turn the caller's own task
	// takes from no message of this kind (a message naming a workflow
	// execution) or through no such door (a pool's door, ?agent=, naming
	// another pool than the one holding the task or ACP session): its
	// text, which names only the caller's task and its pool, is the
	// client's message (it matches ErrConflict too).
	ErrTurnConflict = fmt.Errorf("%w: the task takes no such message", ErrConflict)
	// ErrTooLarge: the encoded envelope is larger than the pipeline
	// accepts; not retryable.
	ErrTooLarge = errors.New("host: request too large for the pipeline")
	// ErrBackpressure: the pipeline did not accept the request in time;
	// the client should retry.
	ErrBackpressure = errors.New("host: pipeline unavailable, retry later")
)

// Refusal is a protocol-neutral refusal (authentication, rate limit, body
// size…); each protocol writes it in its own error shape with a [Refuse].
type Refusal struct {
	Status    int    // HTTP status
	Code      string // machine-readable code for E2A and A2E bodies
	Message   string
	Retryable bool
	RPCCode   int // JSON-RPC error code
	Data      any // protocol-neutral detail (the rate limit exceeded)
	// Challenges are the WWW-Authenticate challenges of a refusal for
	// want of credentials, added to an HTTP answer ([RefuseJSONRPC]).
	Challenges []string
	// RetryAfter is how long the client should wait before it retries (a
	// rate limit's window, a stream slot); 0 when not known. An HTTP
	// answer carries it as Retry-After, set by the gate (or else by the
	// protocol's Refuse: [Refusal.SetRetryAfter]); a gRPC status, which
	// has no such header, as a google.rpc.RetryInfo detail; an A2E error
	// line as detail.retry_after.
	RetryAfter time.Duration
}

// RetryAfterSeconds is the refusal's wait as a Retry-After value
// ([WaitSeconds]).
func (f Refusal) RetryAfterSeconds() int64 { return WaitSeconds(f.RetryAfter) }

// WaitSeconds is a wait as every protocol says it (Retry-After, A2E's
// retry_after, a google.rpc.RetryInfo's delay): whole seconds, rounded up,
// at least 1; 0 for none (d ≤ 0).
func WaitSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// SetRetryAfter sets the refusal's wait ([Refusal.RetryAfterSeconds]) as
// h's Retry-After when it has one and h carries none yet: one already set
// (the gate's, set first) wins.
func (f Refusal) SetRetryAfter(h http.Header) {
	if s := f.RetryAfterSeconds(); s > 0 && h.Get("Retry-After") == "" {
		h.Set("Retry-After", strconv.FormatInt(s, 10))
	}
}

// SetHeaders adds the refusal's challenges to h as WWW-Authenticate and
// sets its wait as Retry-After ([Refusal.SetRetryAfter]): the headers of
// an HTTP answer to it, whatever shape its body takes.
func (f Refusal) SetHeaders(h http.Header) {
	for _, c := range f.Challenges {
		h.Add("WWW-Authenticate", c)
	}
	f.SetRetryAfter(h)
}

// Refuse writes a refusal in one protocol's error shape.
type Refuse func(w http.ResponseWriter, f Refusal)

// Accepted is a request the pipeline accepted.
type Accepted struct {
	RequestID string
	Pool      string
	// Duplicate: the same request id was already accepted; nothing new
	// was published.
	Duplicate bool
	// Warning: the pool has no live worker right now.
	Warning string
}

// Gate admits a request before anything of it is read.
type Gate interface {
	// Admit authenticates r, strips its credential headers and charges
	// the caller's rate limit, counted under protocol. On refusal it
	// writes the refusal with refuse and returns ok=false; nothing has
	// been published.
	Admit(w http.ResponseWriter, r *http.Request, protocol string, refuse Refuse) (c Caller, ok bool)
}

// Caller is the principal a [Gate] admitted, bound to its request.
type Caller interface {
	// Input is the normalizer's view of body, sent by the caller in r,
	// for the agent pool agent ("" for the routing rule's).
	Input(r *http.Request, body []byte, agent string) normalizer.Input
	// Submitter submits a request on behalf of the caller.
	Submitter
	// StreamSlot takes one of the caller's concurrent stream slots (the
	// per-principal bound on streamed answers); when all are taken it
	// writes the refusal with refuse (429, Retry-After: 1) and returns
	// ok=false. Call release when the answer ends.
	StreamSlot(w http.ResponseWriter, refuse Refuse) (release func(), ok bool)
	// Charge charges n more requests to the caller's rate limit, counted
	// under protocol: the gate charged one, and a body that submits several
	// requests (an A2E body of many messages) counts each. Over the limit
	// (or with the limiter unavailable) it returns the refusal; nil when
	// charged.
	Charge(ctx context.Context, protocol string, n int) *Refusal
	// TurnRecords finds the task or ACP session a request names, so that
	// the request is one of its turns (run after the one before).
	TurnRecords
}

// TurnRecords is what a front door asks of its caller to make a request
// naming a task or an ACP session a turn of it, as the A2A, AgentVault
// and ACP front doors make theirs (the E2A front door's task_id and
// session_id).
type TurnRecords interface {
	// Record returns the task id (with session, the session id: an ACP
	// session's) when the caller may write it; nil when there is none; an
	// error matching [ErrConflict], saying nothing of it, when it is
	// another principal's, [ErrBackpressure] when that cannot be read.
	Record(ctx context.Context, id string, session bool) (*Task, error)
	// CheckTaskOpen checks that the A2A task t can take a new message
	// ([Tasks]): an error matching [ErrTaskTerminal] once it has
	// finished.
	CheckTaskOpen(ctx context.Context, t *Task) error
}

// Answerer answers an accepted request from its frames; *egress.Service
// is one.
type Answerer interface {
	// Serve writes the frames of requestID from the resume point of r
	// with the renderer newRenderer builds, format naming it in metrics.
	Serve(w http.ResponseWriter, r *http.Request, requestID, format string, newRenderer render.NewRenderer)
	// ServeE2A writes the E2A answer of requestID as r asks for it: its
	// frames as SSE or NDJSON (Accept), else its JSON view (?wait=true:
	// once the final frame is in). It is egress's own read API, the format
	// frames are stored in.
	ServeE2A(w http.ResponseWriter, r *http.Request, requestID string)
	// WriteTimeout is how long one write of an answer may block before
	// the client is cut off as too slow (egress.WithWriteTimeout): a
	// stream a protocol writes itself (ACP's session/load replay) holds
	// its clients to it too.
	WriteTimeout() time.Duration
}

var _ Answerer = (*egress.Service)(nil)

// Host is the pipeline as a protocol's front door sees it.
type Host interface {
	Gate
	Answerer
	// Normalizer decodes requests (its adapter for the protocol).
	Normalizer() *normalizer.Normalizer
	// MaxBody bounds a request body, in bytes.
	MaxBody() int64
	// Version is the server's version (handshakes, cards).
	Version() string
}

// Route is one HTTP route of a protocol's front door, mounted by the host
// at "Method Path"; other methods on Path are answered 405.
type Route struct {
	Method, Path string
	Handler      http.Handler
}
