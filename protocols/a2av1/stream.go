package a2av1

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/errordetails"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/render"
)

// StreamFormat is the output format of the JSON-RPC binding's streams
// (egress.Formats, the label of egress's metrics): SendStreamingMessage's
// SSE, rendered by [NewStream].
const StreamFormat = egress.FormatA2AV1SSE

// SendFormat is blocking SendMessage's answer on every binding, and
// GRPCStreamFormat the gRPC binding's streams (SendStreamingMessage,
// SubscribeToTask): the labels they are counted under (egress.CountedAs),
// as StreamFormat's are.
const (
	SendFormat       = egress.FormatA2AV1JSON
	GRPCStreamFormat = egress.FormatA2AV1GRPC
)

// now is the clock of the submitted status of the Task a stream opens
// with when the call gives no submitted time, and of the timestamp of an error's
// ErrorInfo; tests fix it.
var now = time.Now

var (
	_ render.Renderer    = (*stream)(nil)
	_ render.PassThrough = (*stream)(nil)
)

// A resumed stream learns from the frames before its resume point
// (StreamBase.Prime).
var _ render.Primer = (*stream)(nil)

// stream renders SendStreamingMessage of the JSON-RPC binding: SSE whose
// data: is a JSON-RPC response with a v1.0 StreamResponse as result, the
// bytes the SDK's JSON-RPC transport writes for the same events
// (TestStreamMatchesSDK), written through egress's Output: the events of a
// burst of frames go out in one write, where the SDK's transport flushes
// each event alone. The SSE id of each frame's last event is the frame's
// sequence (Last-Event-ID resumes after it); the SDK gives each event a
// random one.
type stream struct {
	a2aproto.StreamBase
	rest  bool // the HTTP+JSON binding's: no JSON-RPC response around the events, REST errors
	p     a2amap.Params
	from  int64
	rpcID []byte // the JSON-RPC id as sent (rpcID)
	// later, when set, is the turn the task's record lists after this one
	// ("" when none: a2aproto.Follow.Later), read when the final frame's
	// events end the task or the turn: a terminal state that a later turn
	// takes back is not written (A2A: a terminal state is final), nor an
	// interrupted one whose answer is recorded already.
	later func() string
	// next is that later turn: the final status was written in the
	// state the task then has (submitted), and the stream goes on with
	// the next turn's (followStream).
	next string
	// continued: the stream goes on from an earlier turn's: its head is
	// written. followed: a later turn than the call's: it opens with no
	// Task. done: it ended without an error.
	continued, followed, done bool
}

// NewStream returns the renderer of SendStreamingMessage's JSON-RPC SSE
// (format [StreamFormat]) for requestID from sequence from (the resume
// point): the Task first (p.Task, as tasks/get shows it when the call's
// turn is recorded; submitted at p.Submitted, else now), unless resuming
// or the agent
// answers with a Message (written with the first frame: the stream is
// then that message alone), then each frame's
// events as protocols/a2a's Answers.A2AEvents yields them (a2amap's A2A
// v1.0 events, written as they are); an error ends the stream as a
// JSON-RPC error in the SDK's shape. id is the call's JSON-RPC id, which
// every event carries as sent (absent or invalid: null), where the SDK's
// transport writes it decoded and encoded again (rpcid.go).
func NewStream(o *render.Output, requestID string, p a2amap.Params, id json.RawMessage, from int64) render.Renderer {
	return &stream{StreamBase: a2aproto.StreamBase{Out: o, Mapper: a2amap.NewStreamMapper(requestID, p, from)}, p: p, from: from, rpcID: rpcID(id)}
}

// NewRESTStream is [NewStream] for the HTTP+JSON binding's
// message:stream: each data: is the v1.0 StreamResponse alone, and an
// error ends the stream as the binding's google.rpc.Status (restError),
// as the SDK's HTTP+JSON transport writes them.
func NewRESTStream(o *render.Output, requestID string, p a2amap.Params, from int64) render.Renderer {
	return &stream{StreamBase: a2aproto.StreamBase{Out: o, Mapper: a2amap.NewStreamMapper(requestID, p, from)}, rest: true, p: p, from: from}
}

func (r *stream) Start() error {
	if !r.continued {
		render.SSEHead(r.Out, 0)
	}
	r.Opening = r.from == 0 && !r.followed
	return nil
}

// submitted writes the Task a task's stream opens with (StreamBase.Events;
// A2A v1.0 §3.1.2: the stream begins with the Task): the task as its turn
// was submitted (a2amap.Mapper.OpeningTask), without the parts the client
// must not get, as each event. It has no SSE id: a stream resumed after
// any frame does not repeat it.
func (r *stream) submitted() error {
	ts := r.p.SubmittedTime(now)
	evs := a2aproto.FilterEvents(r.p, []a2a.Event{r.Mapper.OpeningTask(r.p, &ts)})
	return r.event("", evs[0])
}

func (r *stream) Frame(f *render.Frame) error {
	b, text := r.textEvent(f)
	evs, err := r.Events(f, b, text, r.submitted)
	if err != nil || len(evs) == 0 {
		return err
	}
	if r.later != nil && f.IsFinal() {
		r.followLater(evs)
	}
	// The client's parts only (its output modes, the interaction spec), as
	// v0.3's stream; a frame left with nothing is not sent.
	return render.FrameEvents(f, a2aproto.FilterEvents(r.p, evs), func(id string, ev a2a.Event) error {
		if id != "" && r.IDPrefix != "" {
			id = r.IDPrefix + id
		}
		return r.event(id, ev)
	})
}

// followLater writes the final frame's terminal or interrupted status
// (among evs; a2aproto.TakenBack) in the state submitted, with its
// message (an interrupted turn's question), when the task's record lists
// a turn after this one (later): the task goes on with it, and so does
// the stream (next).
func (r *stream) followLater(evs []a2a.Event) {
	for i, ev := range evs {
		su, ok := ev.(*a2a.TaskStatusUpdateEvent)
		if !ok || !a2aproto.TakenBack(su.Status.State) {
			continue
		}
		if r.next = r.later(); r.next != "" {
			c := *su
			c.Status.State = a2a.TaskStateSubmitted
			evs[i] = &c
		}
		return
	}
}

// PassThrough: frames are read without a full decode; textEvent renders
// a plain text chunk from its bytes, Frame decodes the others.
func (*stream) PassThrough() bool { return fastText }

// fastText enables the text fast path (textEvent); the differential test
// turns it off to get the reference bytes.
var fastText = true

// textEvent renders the event of a plain text chunk, the bulk of a
// streamed answer, straight from the frame's bytes (render.ReadTextChunk)
// into the JSON-RPC response: exactly the bytes event writes for the
// TaskArtifactUpdateEvent a2amap.Mapper.Events builds for it
// (TestStreamFastTextMatches), without the event, its maps or the
// reflection encode. ok is false for any other frame,
// which takes the general path; nothing is changed then.
func (r *stream) textEvent(f *render.Frame) (out []byte, ok bool) {
	if !fastText {
		return nil, false
	}
	u, ok := a2aproto.ReadTextUpdate(r.Mapper, f)
	if !ok {
		return nil, false
	}
	// The constant parts take 230 bytes; escapes may need more.
	b := slices.Grow(r.Buf[:0], 300+len(r.rpcID)+u.Len())
	r.Buf = nil
	if !r.rest {
		b = append(b, `{"jsonrpc":"2.0","id":`...)
		b = append(b, r.rpcID...)
		b = append(b, `,"result":`...)
	}
	b = append(b, `{"artifactUpdate":{`...)
	b = u.AppendMembers(b, true)
	b = append(b, '}')
	if !r.rest {
		b = append(b, '}')
	}
	return b, true
}

func (r *stream) Heartbeat() error { return render.SSEComment(r.Out, "keep-alive") }

func (r *stream) End(err error) error {
	r.done = err == nil
	if err == nil && r.next != "" {
		// The next turn may be long in coming: this one's end goes out
		// now.
		return r.Out.Flush()
	}
	if err == nil {
		return nil
	}
	r.next = "" // nothing follows an error
	if r.rest {
		return render.SSEEndEvent(r.Out, "", restError(err))
	}
	if !r.Out.Started() {
		render.SSEHead(r.Out, 0)
	}
	return render.SSEEvent(r.Out, "", "", rpcErrorJSON(r.rpcID, Error(err)))
}

// event writes ev as one SSE event with SSE id id.
func (r *stream) event(id string, ev a2a.Event) error {
	res, err := json.Marshal(a2a.StreamResponse{Event: ev})
	if err != nil {
		return err
	}
	if r.rest {
		return render.SSEEvent(r.Out, id, "", res)
	}
	b := slices.Grow(r.Buf[:0], len(res)+len(r.rpcID)+32)
	r.Buf = nil
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, r.rpcID...)
	b = append(b, `,"result":`...)
	b = append(b, res...)
	b = append(b, '}')
	err = render.SSEEvent(r.Out, id, "", b)
	r.Buf = render.KeepScratch(b)
	return err
}

// rpcCodes are the JSON-RPC codes of the SDK's errors, as its transports
// write them (a2a-go's JSON-RPC error table).
var rpcCodes = []struct {
	code int
	err  error
}{
	{-32700, a2a.ErrParseError},
	{-32600, a2a.ErrInvalidRequest},
	{-32601, a2a.ErrMethodNotFound},
	{-32602, a2a.ErrInvalidParams},
	{-32603, a2a.ErrInternalError},
	{-32000, a2a.ErrServerError},
	{-32001, a2a.ErrTaskNotFound},
	{-32002, a2a.ErrTaskNotCancelable},
	{-32003, a2a.ErrPushNotificationNotSupported},
	{-32004, a2a.ErrUnsupportedOperation},
	{-32005, a2a.ErrUnsupportedContentType},
	{-32006, a2a.ErrInvalidAgentResponse},
	{-32007, a2a.ErrExtendedCardNotConfigured},
	{-32008, a2a.ErrExtensionSupportRequired},
	{-32009, a2a.ErrVersionNotSupported},
	{-31401, a2a.ErrUnauthenticated},
	{-31403, a2a.ErrUnauthorized},
}

// Error is the JSON-RPC error a stream of the JSON-RPC binding ends with
// for err (egress's, the host's: sdkError's table), as the SDK's transport
// writes it: the code of the SDK's error (-32603 for none), what a client
// reads of the error (egress.ClientMessage) as message, and its details
// (errorDetails: a temporary failure's google.rpc.RetryInfo, then an
// ErrorInfo with the error's reason, A2A's domain and the time;
// TestStreamMatchesSDK).
func Error(err error) *jsonrpc.Error {
	err = sdkError(err)
	code := -32603
	for _, c := range rpcCodes {
		if errors.Is(err, c.err) {
			code = c.code
			break
		}
	}
	return &jsonrpc.Error{Code: code, Message: egress.ClientMessage(err), Data: errorDetails(err, a2a.ErrorReason(err))}
}

// restCodes are the HTTP and google.rpc statuses of the SDK's errors, as
// its HTTP+JSON transport writes them (a2a-go's REST error table).
var restCodes = []struct {
	err    error
	status int
	code   string
}{
	{a2a.ErrParseError, http.StatusBadRequest, "INVALID_ARGUMENT"},
	{a2a.ErrInvalidRequest, http.StatusBadRequest, "INVALID_ARGUMENT"},
	{a2a.ErrMethodNotFound, http.StatusNotImplemented, "UNIMPLEMENTED"},
	{a2a.ErrInvalidParams, http.StatusBadRequest, "INVALID_ARGUMENT"},
	{a2a.ErrInternalError, http.StatusInternalServerError, "INTERNAL"},
	// A temporary failure (errUnavailable): §3.3.2's 503, where the SDK
	// answers every ServerError 500; its reason stays SERVER_ERROR.
	{errTemporary, http.StatusServiceUnavailable, "UNAVAILABLE"},
	{a2a.ErrServerError, http.StatusInternalServerError, "INTERNAL"},
	{a2a.ErrTaskNotFound, http.StatusNotFound, "NOT_FOUND"},
	{a2a.ErrTaskNotCancelable, http.StatusBadRequest, "FAILED_PRECONDITION"},
	{a2a.ErrPushNotificationNotSupported, http.StatusBadRequest, "FAILED_PRECONDITION"},
	{a2a.ErrUnsupportedOperation, http.StatusBadRequest, "FAILED_PRECONDITION"},
	{a2a.ErrUnsupportedContentType, http.StatusBadRequest, "INVALID_ARGUMENT"},
	{a2a.ErrInvalidAgentResponse, http.StatusInternalServerError, "INTERNAL"},
	{a2a.ErrExtendedCardNotConfigured, http.StatusBadRequest, "FAILED_PRECONDITION"},
	{a2a.ErrExtensionSupportRequired, http.StatusBadRequest, "FAILED_PRECONDITION"},
	{a2a.ErrVersionNotSupported, http.StatusBadRequest, "FAILED_PRECONDITION"},
	{a2a.ErrUnauthenticated, http.StatusUnauthorized, "UNAUTHENTICATED"},
	{a2a.ErrUnauthorized, http.StatusForbidden, "PERMISSION_DENIED"},
	{context.Canceled, 499, "CANCELLED"},
	{context.DeadlineExceeded, http.StatusGatewayTimeout, "DEADLINE_EXCEEDED"},
}

// restStatus is the HTTP+JSON binding's error body (google.rpc.Status).
type restStatus struct {
	Error struct {
		Code    int                   `json:"code"`
		Status  string                `json:"status"`
		Message string                `json:"message"`
		Details []*errordetails.Typed `json:"details,omitempty"`
	} `json:"error"`
}

// restError is the google.rpc.Status an HTTP+JSON stream ends with for
// err (egress's, the host's: sdkError's table), as the SDK's transport
// writes it: the HTTP status and status name of the SDK's error (restCode),
// what a client reads of the error (egress.ClientMessage), and its details
// (errorDetails: a temporary failure's google.rpc.RetryInfo, then an
// ErrorInfo with the error's reason, A2A's domain and the time;
// TestStreamMatchesSDK).
func restError(err error) restStatus {
	err = sdkError(err)
	var out restStatus
	var reason string
	out.Error.Code, out.Error.Status, reason = restCode(err)
	out.Error.Message = egress.ClientMessage(err)
	out.Error.Details = errorDetails(err, reason)
	return out
}

// restTaskError is restError for a call on the task id (the path
// /tasks/{id}…): its ErrorInfo's metadata names the task (taskId), as the
// SDK's HTTP+JSON handler writes GetTask's and CancelTask's errors; for
// no id (a call on no task), restError.
func restTaskError(err error, id string) restStatus {
	st := restError(err)
	if id == "" {
		return st
	}
	for _, d := range st.Error.Details {
		if m, ok := d.Value["metadata"].(map[string]string); ok && d.TypeURL == errordetails.ErrorInfoType {
			m["taskId"] = id
		}
	}
	return st
}

// restCode is the HTTP status, the google.rpc status name and the ErrorInfo
// reason of the A2A error err on the HTTP+JSON binding: restCodes' (500
// INTERNAL for none), with §5.4's status where the SDK's differs
// (specHTTPStatus).
func restCode(err error) (status int, code, reason string) {
	status, code, reason = http.StatusInternalServerError, "INTERNAL", "INTERNAL_ERROR"
	for _, c := range restCodes {
		if errors.Is(err, c.err) {
			status, code, reason = c.status, c.code, a2a.ErrorReason(c.err)
			break
		}
	}
	if c, ok := specHTTPStatus[reason]; ok {
		status = c
	}
	return status, code, reason
}
