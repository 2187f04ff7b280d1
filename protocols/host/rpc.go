package host

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// The JSON-RPC seam: a JSON-RPC protocol package describes its endpoint
// ([RPCEndpoint]: its calls and how they are dispatched) and the host
// keeps the transports (HTTP with batches and notifications, lines on
// stdio), handing each call its [Reply], its [Call] and its [RPCCaller].

// Method is one JSON-RPC method of a protocol.
type Method struct {
	Name string
	// Streaming methods are answered as a stream (SSE or NDJSON) and so
	// cannot be part of a JSON-RPC batch.
	Streaming bool
}

// Reply is where the answer of one JSON-RPC call goes, whatever carries
// it: the HTTP response of a single call, a value for a batch element or a
// notification, or a line on stdio. A call answers exactly once, with
// Result, Error or Refuse, or by streaming into Stream.
type Reply interface {
	// Result answers with a result.
	Result(v any)
	// Error answers with a JSON-RPC error.
	Error(e *jsonrpc.Error)
	// Refuse answers with a refusal that also has an HTTP status (413,
	// 429, 503…) where the transport has one.
	Refuse(f Refusal)
	// Header holds headers of the answer (Warning, Retry-After); they are
	// dropped where the transport has none.
	Header() http.Header
	// Stream is the writer a streaming method renders its answer into
	// (SSE, NDJSON), or nil when the answer cannot stream (a batch element,
	// a notification): the call then acts without rendering.
	Stream() http.ResponseWriter
}

// Call is what one JSON-RPC call carries besides its message, whatever
// the transport.
type Call struct {
	Ctx context.Context
	// Header is the HTTP request's headers; on stdio, the ones the
	// connection sets (Idempotency-Key).
	Header http.Header
	// Agent is the agent pool asked for (?agent=).
	Agent string
	// Channel is the envelope's provenance channel: "http" or "stdio".
	Channel string
	// Request is the HTTP request when the transport is HTTP (streams
	// negotiate their format and resume from it); nil on stdio.
	Request *http.Request
	// Received is when the transport received the call, before its
	// admission (HTTP: the request's handling began; stdio: its line was
	// read, so in the order read); zero when the transport does not say
	// (now is its time then). A cancel of a session's turns compares it
	// ([SessionCanceler]).
	Received time.Time
}

// WithContext returns c with ctx (the context of one batch element).
func (c Call) WithContext(ctx context.Context) Call {
	c.Ctx = ctx
	if c.Request != nil {
		c.Request = c.Request.WithContext(ctx)
	}
	return c
}

// RPCEndpoint is a JSON-RPC 2.0 protocol as the host's transports serve
// it: its name (the metrics' protocol label and the gate's), its refusal
// shape, which methods stream, the metric label of a method and the
// answer of one call.
type RPCEndpoint struct {
	// Protocol labels the endpoint in metrics and the gate.
	Protocol string
	// Refuse writes a refusal of the gate (before any call is read) in the
	// protocol's error shape.
	Refuse Refuse
	// Streaming reports the methods answered as a stream (refused inside
	// a batch).
	Streaming func(method string) bool
	// Metric bounds a method name for a metric label.
	Metric func(method string) string
	// Serve answers one call; for a notification (no id) it acts but
	// answers nothing worth reading and never waits for an agent.
	Serve func(rep Reply, in Call, c RPCCaller, req *jsonrpc.Request)
	// NotifyErrors answers an id-less call that fails with its JSON-RPC
	// error (id null) instead of no content (A2A: it defines no
	// notifications).
	NotifyErrors bool
	// Lines, when set, is how the protocol is served over a line transport
	// (ACP over stdio).
	Lines *Lines
	// Peek, when set, sees the body of each HTTP request before the gate
	// (read within MaxBody; the host answers 413 itself), the credential
	// checked before the body is read: a request whose credential is
	// refused is shown only what [RefusalBody] reads (nil for most), and
	// refused by the gate whatever Peek returns. It returns the
	// handler that serves the request instead (A2A: a single v1.0 call,
	// to the v1.0 handler), or nil and the refusal the gate writes for
	// this body (A2A: echoing the call's id).
	Peek func(body []byte) (divert http.Handler, refuse Refuse)
	// Open, when set, reports the methods answered over HTTP to a caller
	// that presents no credential where the server's auth requires one
	// (ACP: initialize, whose result lists the auth methods the client
	// then uses): a single call with an id of one ([IsOpenCall]), its
	// body of a declared length within [MaxRefusalBody], is admitted
	// unauthenticated, counted by the rate limit as the anonymous
	// principal. Such a method must publish nothing and read no task or
	// session. A presented credential is always checked; a batch, a
	// notification, any other method is refused as before. Nil: none.
	Open func(method string) bool
	// Cancels, when set, reports the methods that cancel a request of the
	// caller (A2A tasks/cancel, ACP session/cancel): a single such call
	// ([IsCancelCall]) is admitted on the caller's budget of cancels when
	// its rate limit is spent. Nil: no method is a cancel.
	Cancels func(method string) bool
}

// Lines is what a line transport (one JSON-RPC message per line, calls
// running concurrently) needs of a protocol beyond its calls: how a call
// can be cancelled.
type Lines struct {
	// CancelMethod is the notification that cancels one call in flight by
	// its id (params.requestId), e.g. "$/cancel_request".
	CancelMethod string
	// Cancelled is the answer of a call cancelled so that stopped before
	// answering.
	Cancelled *jsonrpc.Error
	// Classify says what a call is before it runs, from its method and
	// params.
	Classify func(method string, params json.RawMessage) LineCall
}

// LineCall is what a line transport knows of a call before it runs it.
type LineCall struct {
	// Publishes: the call publishes a pipeline request; the transport fixes
	// its request id beforehand (the Idempotency-Key header of its Call),
	// so that a cancel can name the request before it is published.
	Publishes bool
	// Turn: the call is a turn of Session (ACP session/prompt): it ends
	// by itself once cancelled in the pipeline, so the cancel method
	// cancels its request instead of stopping it.
	Turn bool
	// CancelsTurns: the call cancels the turns of Session in flight (ACP
	// session/cancel).
	CancelsTurns bool
	// Session is the session the call names (params.sessionId, else
	// session_id: the session its decoding reads).
	Session string
}

// ErrSessionNotFound is the error of [Sessions] for a session that does
// not exist, is another protocol's, or belongs to another principal.
var ErrSessionNotFound = errors.New("host: session not found")

// Session is the ownership record of a protocol's session in the task
// store: who created it, the pool serving it and its requests.
type Session struct {
	ID, Protocol, Pool string
	// Principal is the principal the record was accepted for, whose
	// requests alone are the record's ([Session.Owns]); "" with
	// authentication off (every request is the one principal's).
	Principal string
	// Writers are the other principals whose turns the record lists (an
	// admin's): a request whose envelope is gone, judged by the user_id of
	// its frames, is the record's when it is theirs too ([Session.OwnsFrames]).
	Writers []string
	// RequestIDs are its requests, oldest first.
	RequestIDs []string
	// Dropped counts its oldest requests no longer listed (the record
	// keeps the newest 256): a read of it is not whole, and says so.
	Dropped int
	// CancelBefore, of the session a session/cancel marked
	// ([SessionCanceler]), is when that cancel was received: its
	// [Canceler.CancelTurns] leaves running a turn received at or after it
	// (the envelope's timestamp, the time its front door received it),
	// recorded before the mark though it was. Zero: every turn not ended.
	CancelBefore time.Time
}

// Owns reports whether the stored request env is one of the record's:
// accepted for its principal (its user_id, or the conversation owner an
// admin's turn names: e2a.Envelope.Owner). The record outlives its
// requests in the hot streams (E2A_TASKS keeps it longer), and an id it
// lists is free again once they dropped its request: a request stored
// under it since is another principal's, none of the record's. Every
// read, subscription or cancel of the record's requests asks.
func (s *Session) Owns(env *e2a.Envelope) bool {
	return s.Principal == "" || env.UserID == s.Principal || env.Owner() == s.Principal
}

// OwnsFrames reports whether frames naming user (their user_id: the
// envelope's, copied by the agent) are the record's, for a request whose
// envelope is gone: its principal's, or a writer's (an admin's turn, whose
// frames name the admin; another principal under a reused id names
// neither).
func (s *Session) OwnsFrames(user string) bool {
	return s.Principal == "" || user == s.Principal || slices.Contains(s.Writers, user)
}

// LastRequest is the id of the session's latest request ("" when none).
func (s *Session) LastRequest() string {
	if len(s.RequestIDs) == 0 {
		return ""
	}
	return s.RequestIDs[len(s.RequestIDs)-1]
}

// Turn names the task (A2A, AgentVault) or session (ACP) record a
// request is a turn of. Turns of one record run one after another in the
// order they were appended: the host appends the request before it
// publishes it, and the request it published names the record's previous
// request (subjects.HeaderAfterRequest), which the agent runtime waits
// for.
type Turn struct {
	// Task is the record: its ID, Protocol and Pool, and for a task its
	// ContextID.
	Task Task
	// Session: the record is a session's (ACP), not a task's.
	Session bool
	// Created: the adapter made the task id up (its request id), so there
	// is no record to read first; the request stands for the record until
	// a second turn writes one.
	Created bool
	// NewContext: the turn gives its task its context (Task.ContextID, the
	// envelope's): the first turn of a task E2A starts, or a turn naming a
	// context of a task whose record holds none. The context is recorded
	// on the task (later turns naming another are refused) and claimed
	// for the caller before anything is published, as a new task's
	// (another principal's is [ErrContextConflict]).
	NewContext bool
	// Received, of a session's turn, is when the front door received it
	// ([Call.Received]): a turn received before a cancel of the session
	// ([SessionCanceler]) and recorded after it is cancelled once
	// published. Zero: no such check.
	Received time.Time
}

// SessionCanceler is what a caller adds to [Sessions] for a cancel of a
// session's turns over a transport that does not order calls (HTTP: a
// prompt and the cancel sent after it are two requests, which may be
// handled in either order).
type SessionCanceler interface {
	// CancelSession marks the caller's session id of protocol as
	// cancelled for every turn received before received ([Turn.Received]):
	// such a turn recorded after the mark is cancelled once published. It
	// returns the session as the mark was written: every turn recorded
	// before the mark is among its RequestIDs, for [Canceler.CancelTurns].
	// [ErrSessionNotFound] when the caller may not write it, with nothing
	// written.
	CancelSession(ctx context.Context, protocol, id string, received time.Time) (*Session, error)
}

// Sessions keeps the sessions of the caller in the task store, where a
// session of another principal does not exist.
type Sessions interface {
	// CreateSession records a new session of the caller with no request
	// yet; it fails if the id exists.
	CreateSession(ctx context.Context, protocol, id, pool string) error
	// Session returns the caller's session id of protocol when it may
	// have access a to it; [ErrSessionNotFound] otherwise.
	Session(ctx context.Context, protocol, id string, a tenant.Access) (*Session, error)
	// PutSessionData stores a document of the session under kind
	// (beside its record; kind is the protocol's own).
	PutSessionData(ctx context.Context, kind, id string, data []byte) error
	// SessionData returns the document PutSessionData stored.
	SessionData(ctx context.Context, kind, id string) ([]byte, error)
}

// RPCCaller is the principal a JSON-RPC transport admitted, as one call
// sees it.
type RPCCaller interface {
	// Input is the normalizer's view of the decoded call req (read as is,
	// with no second encode and parse).
	Input(in Call, req *jsonrpc.Request) normalizer.Input
	// Submitter submits a request on behalf of the caller; answer its
	// error with [ReplySubmitted] (the pipeline's JSON-RPC errors).
	Submitter
	// StreamSlot takes one of the caller's concurrent stream slots; when
	// none is free it answers rep itself (429, Retry-After) and returns
	// ok=false.
	StreamSlot(rep Reply) (release func(), ok bool)
	Sessions
}

// Frames reads the pipeline's requests and their frames.
type Frames interface {
	// Replay calls fn with every frame of requestID, waiting for those not
	// yet written, up to the final one (egress.Replay).
	Replay(ctx context.Context, requestID string, fn func(render.Frame) error) error
	// Stored calls fn with the frames of requestID stored so far, from the
	// first one stored: when the first frames aged out of E2A_RESPONSES,
	// the first frame's sequence is past 0 (egress.WithFirstStored);
	// egress.ErrNotFound when it has none.
	Stored(ctx context.Context, requestID string, fn func(*e2a.Response) error) error
	// Last returns the last frame of requestID stored so far (one direct
	// get); egress.ErrNotFound when it has none.
	Last(ctx context.Context, requestID string) (*e2a.Response, error)
	// Envelope returns the envelope of requestID, nil when the pipeline no
	// longer holds it; an error when the requests cannot be read at all.
	Envelope(ctx context.Context, requestID string) (*e2a.Envelope, error)
}

// Canceler cancels requests in the pipeline.
type Canceler interface {
	// Cancel publishes a cancel on the request's control subject (stored
	// for a worker that has not picked the request up yet).
	Cancel(ctx context.Context, requestID string) error
	// CancelTurns cancels the turns of the session s (its requests, oldest
	// first) that have not ended, newest first (so that a turn waiting for
	// an earlier one never runs), without awaiting them; a request that is
	// not the session's own ([Session.Owns]) is never cancelled.
	CancelTurns(ctx context.Context, s *Session) error
}

// AuthMethod is one way the host authenticates a caller, for a protocol's
// handshake.
type AuthMethod struct {
	ID, Name, Description string
	// StdioDescription is how a client on stdio (an editor running `e2a
	// acp`) gives the credential: in its environment, since it sends no
	// headers; Description says how an HTTP client does.
	StdioDescription string
}

// Authentication describes the host's authentication.
type Authentication interface {
	// AuthMethods lists the configured schemes a client can use (none
	// when the host has no authentication).
	AuthMethods() []AuthMethod
}

// FromAnswerer answers an accepted request from its frames where there is
// no HTTP request to resume from; *egress.Service is one.
type FromAnswerer interface {
	// ServeFrom is [Answerer.Serve] for a transport without HTTP requests
	// (ACP over stdio): the frames of requestID from sequence from, into w.
	ServeFrom(ctx context.Context, w http.ResponseWriter, requestID, format string, from int64, newRenderer render.NewRenderer)
}

var _ FromAnswerer = (*egress.Service)(nil)

// RPCHost is the pipeline as a JSON-RPC protocol package sees it: the
// [Host], and the roles its calls use.
type RPCHost interface {
	Host
	FromAnswerer
	Frames
	Canceler
	Authentication
	// Logger is where a protocol logs what an operator must see.
	Logger() *slog.Logger
}

// HTTPReply answers one JSON-RPC call with id as the whole HTTP response
// w.
func HTTPReply(w http.ResponseWriter, id json.RawMessage) Reply { return httpReply{w: w, id: id} }

type httpReply struct {
	w  http.ResponseWriter
	id json.RawMessage
}

func (h httpReply) Result(v any)                { _ = jsonrpc.WriteResult(h.w, h.id, v) }
func (h httpReply) Error(e *jsonrpc.Error)      { _ = jsonrpc.WriteError(h.w, h.id, e) }
func (h httpReply) Refuse(f Refusal)            { RefuseJSONRPC(h.w, h.id, f) }
func (h httpReply) Header() http.Header         { return h.w.Header() }
func (h httpReply) Stream() http.ResponseWriter { return h.w }

// RefuseJSONRPC writes a refusal as a JSON-RPC error response with id
// (null when nil) and the refusal's HTTP status, its headers set
// ([Refusal.SetHeaders]: its wait as Retry-After unless w already has one).
func RefuseJSONRPC(w http.ResponseWriter, id json.RawMessage, f Refusal) {
	f.SetHeaders(w.Header())
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Status)
	_ = json.NewEncoder(w).Encode(jsonrpc.ErrorResponse(id, &jsonrpc.Error{Code: f.RPCCode, Message: f.Message, Data: f.Data}))
}
