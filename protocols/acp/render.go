package acp

import (
	"encoding/json"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/render"
)

// Format is the output format of the renderer (egress.Formats, the label
// of egress's metrics).
const Format = egress.FormatACP

// Params describes the ACP session/prompt call a response answers.
type Params struct {
	// JSONRPCID is the id of the session/prompt request.
	JSONRPCID json.RawMessage
	// SessionID names the session in session/update notifications; by
	// default the frames' session_id.
	SessionID string
	// SSE frames every JSON-RPC message as an SSE event (data: the
	// message); otherwise one message per line (NDJSON, the framing of ACP
	// over stdio).
	SSE bool
}

var (
	_ render.Renderer    = (*renderer)(nil)
	_ render.PassThrough = (*renderer)(nil)
)

// renderer renders a session/prompt turn: session/update notifications
// (agent_message_chunk, agent_thought_chunk, tool_call, tool_call_update,
// plan), then the JSON-RPC response: result {stopReason} or error.
type renderer struct {
	o     *render.Output
	p     Params
	calls openCalls // the turn's tool calls not ended
	// pending, when set, returns the tracker holding the calls the
	// session's earlier turns left pending (frontDoor.leftPending): read
	// once, before the turn's first frame (primed).
	pending func() openCalls
	primed  bool
}

// NewRenderer returns the ACP renderer of the session/prompt p describes.
func NewRenderer(o *render.Output, p Params) render.Renderer { return &renderer{o: o, p: p} }

// PassThrough: the renderer reads whole frames only where
// TextUpdate does not apply (Frame decodes them then).
func (*renderer) PassThrough() bool { return true }

func (r *renderer) Start() error {
	if r.p.SSE {
		render.SSEHead(r.o, 0)
		return render.SSEComment(r.o, "ok")
	}
	render.NDJSONHead(r.o)
	return nil
}

func (r *renderer) emit(id string, v any) error {
	if r.p.SSE {
		return render.SSEEventJSON(r.o, id, "", v)
	}
	return render.WriteLineJSON(r.o, v)
}

// A resumed prompt learns the tool calls the client saw open (Prime).
var _ render.Primer = (*renderer)(nil)

// Prime is render.Primer: a frame before a resumed prompt's resume point
// (the client has its updates) opens or ends the tool calls it names, so
// the turn's end ends the calls the client saw open before it resumed
// (openCalls), as the whole stream does. A frame that does not decode
// is skipped, as Frame would have failed on it then.
func (r *renderer) Prime(f *render.Frame) error {
	r.prime()
	resp, err := f.Decoded()
	if err != nil {
		return nil
	}
	ups, _ := r.calls.updates(resp)
	for _, u := range ups {
		r.calls.track(u)
	}
	return nil
}

// prime starts the turn's tracker with the calls earlier turns left
// pending, once.
func (r *renderer) prime() {
	if !r.primed && r.pending != nil {
		r.calls = r.pending()
	}
	r.primed = true
}

func (r *renderer) Frame(f *render.Frame) error {
	r.prime()
	if b, session, text, ok := textUpdate(f, r.p.SessionID); ok {
		r.p.SessionID = session
		r.calls.said = true // text said (a Task's artifacts would repeat it)
		r.calls.noteText(text)
		if r.p.SSE {
			return render.SSEEvent(r.o, render.SeqID(f), "", b)
		}
		return render.WriteLine(r.o, b)
	}
	resp, err := f.Decoded()
	if err != nil {
		return err
	}
	if r.p.SessionID == "" {
		r.p.SessionID = resp.SessionID
	}
	ups, err := r.calls.updates(resp)
	if err != nil {
		return err
	}
	for i, u := range ups {
		id := ""
		if i == len(ups)-1 && !resp.IsFinal {
			id = render.SeqID(f)
		}
		r.calls.track(u)
		if err := r.emit(id, notification(r.p.SessionID, u)); err != nil {
			return err
		}
	}
	if !resp.IsFinal {
		return nil
	}
	if err := r.endCalls(resp, nil); err != nil {
		return err
	}
	return r.emit(render.SeqID(f), Final(resp, r.p.JSONRPCID))
}

// endCalls ends the turn's tool calls still open (openCalls.end), before
// the session/prompt's answer: final, or the error broke.
func (r *renderer) endCalls(final *e2a.Response, broke error) error {
	for _, u := range r.calls.end(final, broke) {
		if err := r.emit("", notification(r.p.SessionID, u)); err != nil {
			return err
		}
	}
	return nil
}

func (r *renderer) Heartbeat() error {
	if r.p.SSE {
		return render.SSEComment(r.o, "keep-alive")
	}
	_, err := r.o.WriteString("\n")
	return err
}

func (r *renderer) End(err error) error {
	if err == nil {
		return nil
	}
	if !r.o.Started() {
		if err := r.Start(); err != nil {
			return err
		}
	}
	r.prime()
	if err := r.endCalls(nil, err); err != nil {
		return err
	}
	return r.emit("", jsonrpc.ErrorResponse(r.p.JSONRPCID, Error(err)))
}

// notification is the session/update notification of u in session.
func notification(session string, u acpsdk.SessionUpdate) jsonrpc.Notification {
	return jsonrpc.Notification{JSONRPC: "2.0", Method: e2a.ACPSessionUpdate,
		Params: acpsdk.SessionNotification{SessionId: acpsdk.SessionId(session), Update: u}}
}
