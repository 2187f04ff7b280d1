package a2a

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/render"
)

// AgentVaultFormat is the output format of the AgentVault renderer
// (egress.Formats, the label of egress's metrics).
const AgentVaultFormat = egress.FormatAgentVaultSSE

// AgentVaultParams describes the AgentVault call (tasks/sendSubscribe,
// tasks/get) a response answers.
type AgentVaultParams struct {
	// JSONRPCID is the id of the JSON-RPC request (used by errors before
	// the stream starts and by tasks/get).
	JSONRPCID json.RawMessage
	// TaskID names the task; default the frames' task_id, else the request id.
	TaskID string
}

// AgentVault task states (upper case).
const (
	AVSubmitted     = "SUBMITTED"
	AVWorking       = "WORKING"
	AVInputRequired = "INPUT_REQUIRED"
	AVCompleted     = "COMPLETED"
	AVFailed        = "FAILED"
	AVCanceled      = "CANCELED"
)

// AVPart is an AgentVault message part.
type AVPart struct {
	Type     string `json:"type"`
	Content  any    `json:"content"`
	MimeType string `json:"mediaType,omitempty"`
}

// AVMessage is an AgentVault message.
type AVMessage struct {
	Role     string         `json:"role"`
	Parts    []AVPart       `json:"parts"`
	Metadata map[string]any `json:"metadata"`
}

// AVArtifact is an AgentVault artifact.
type AVArtifact struct {
	ID        string         `json:"id"`
	Type      string         `json:"type"`
	Content   any            `json:"content"`
	URL       *string        `json:"url"`
	MediaType string         `json:"mediaType"`
	Metadata  map[string]any `json:"metadata"`
}

// AVStatusEvent is the data of an SSE task_status event.
type AVStatusEvent struct {
	TaskID    string  `json:"taskId"`
	State     string  `json:"state"`
	Timestamp string  `json:"timestamp"`
	Message   *string `json:"message"`
}

// AVMessageEvent is the data of an SSE task_message event.
type AVMessageEvent struct {
	TaskID    string    `json:"taskId"`
	Message   AVMessage `json:"message"`
	Timestamp string    `json:"timestamp"`
}

// AVArtifactEvent is the data of an SSE task_artifact event.
type AVArtifactEvent struct {
	TaskID    string     `json:"taskId"`
	Artifact  AVArtifact `json:"artifact"`
	Timestamp string     `json:"timestamp"`
}

// AVErrorEvent is the data of an SSE error event.
type AVErrorEvent struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// AVTask is the AgentVault Task of tasks/get.
type AVTask struct {
	ID        string         `json:"id"`
	State     string         `json:"state"`
	CreatedAt string         `json:"createdAt"`
	UpdatedAt string         `json:"updatedAt"`
	Messages  []AVMessage    `json:"messages"`
	Artifacts []AVArtifact   `json:"artifacts"`
	Metadata  map[string]any `json:"metadata"`
}

// avState maps an A2A task state to the AgentVault one.
func avState(s a2a.TaskState) string {
	switch s {
	case a2a.TaskStateRejected:
		return AVFailed
	case a2a.TaskStateAuthRequired:
		return AVInputRequired
	case a2a.TaskStateUnknown, a2a.TaskStateUnspecified:
		return AVWorking
	}
	return strings.ToUpper(strings.ReplaceAll(string(s), "-", "_"))
}

func avTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// avParts translates A2A parts: text → {type: text, content}, data →
// {type: data, content}, file → {type: file, content: uri or bytes}.
func avParts(parts a2a.ContentParts) []AVPart {
	out := make([]AVPart, 0, len(parts))
	for _, p := range parts {
		switch t := p.(type) {
		case a2a.TextPart:
			out = append(out, AVPart{Type: "text", Content: t.Text})
		case a2a.DataPart:
			out = append(out, AVPart{Type: "data", Content: t.Data, MimeType: "application/json"})
		case a2a.FilePart:
			switch f := t.File.(type) {
			case a2a.FileURI:
				out = append(out, AVPart{Type: "file", Content: f.URI, MimeType: f.MimeType})
			case a2a.FileBytes:
				out = append(out, AVPart{Type: "file", Content: f.Bytes, MimeType: f.MimeType})
			}
		}
	}
	return out
}

func avRole(r a2a.MessageRole) string {
	if r == a2a.MessageRoleUser {
		return "user"
	}
	return "assistant"
}

func avMessage(m *a2a.Message) AVMessage {
	return AVMessage{Role: avRole(m.Role), Parts: avParts(m.Parts), Metadata: m.Metadata}
}

// avArtifact translates a data part into an AgentVault artifact: a tool
// call is type tool_call, a tool response tool_response, other data its
// part type.
func avArtifact(id string, p a2a.DataPart) AVArtifact {
	typ, _ := p.Metadata[a2amap.MetaPartType].(string)
	switch typ {
	case e2a.ToolFunctionCall:
		typ = "tool_call"
	case e2a.ToolFunctionResponse:
		typ = "tool_response"
	case "":
		typ = "data"
	}
	if cid, ok := p.Data["id"].(string); ok && cid != "" {
		id = cid
	}
	return AVArtifact{ID: id, Type: typ, Content: p.Data, MediaType: "application/json", Metadata: p.Metadata}
}

var _ render.Renderer = (*avStream)(nil)

// avStream renders tasks/sendSubscribe: SSE with event: task_status |
// task_message | task_artifact | error. Text becomes task_message (the
// reasoning with metadata thought=true), tool calls and other data
// task_artifact, the end a task_status COMPLETED, FAILED or CANCELED.
type avStream struct {
	o       *render.Output
	p       AgentVaultParams
	m       *a2amap.Mapper
	working bool
	// later is the turn the task's record lists after this one, read at
	// a final status that ends the task (nil: not read); nextTurn is the
	// one found: that status is written SUBMITTED and the stream goes on
	// with it (serveAgentVault). continued: the stream goes on from an
	// earlier turn's (its head written); idPrefix precedes its event ids.
	later     func() string
	nextTurn  string
	continued bool
	idPrefix  string
	done      bool // ended without an error
}

// NewAgentVaultStream returns the AgentVault SSE renderer.
func NewAgentVaultStream(o *render.Output, requestID string, p AgentVaultParams) render.Renderer {
	return newAgentVaultStream(o, requestID, p)
}

func newAgentVaultStream(o *render.Output, requestID string, p AgentVaultParams) *avStream {
	return &avStream{o: o, p: p, m: a2amap.NewTaskMapper(p.TaskID, requestID)}
}

// SetIDPrefix sets the prefix of the event ids (ServeFollowed).
func (r *avStream) SetIDPrefix(p string) { r.idPrefix = p }

func (r *avStream) Start() error {
	if r.continued {
		return nil
	}
	render.SSEHead(r.o, 0)
	return render.SSEComment(r.o, "ok")
}

func (r *avStream) Frame(f *render.Frame) error {
	resp, err := f.Decoded()
	if err != nil {
		return err
	}
	evs, err := r.m.Events(resp)
	if err != nil {
		return err
	}
	ts := resp.Timestamp
	if t := a2amap.FrameTime(resp); t != nil {
		ts = avTime(t)
	}
	type out struct {
		event string
		data  any
	}
	var outs []out
	task := r.m.TaskID()
	if !r.working {
		r.working = true
		outs = append(outs, out{"task_status", AVStatusEvent{TaskID: task, State: AVWorking, Timestamp: ts}})
	}
	for _, v := range evs {
		// The profile follows A2A's events in v0.3 (its edge).
		ev, err := a2amap.V03Event(v, false)
		if err != nil {
			return err
		}
		switch e := ev.(type) {
		case *a2a.TaskArtifactUpdateEvent:
			if e.Artifact == nil {
				continue
			}
			for _, p := range e.Artifact.Parts {
				switch t := p.(type) {
				case a2a.TextPart:
					var meta map[string]any
					if t.Metadata[a2amap.MetaThought] == true {
						meta = map[string]any{a2amap.MetaThought: true}
					}
					outs = append(outs, out{"task_message", AVMessageEvent{TaskID: task, Timestamp: ts,
						Message: AVMessage{Role: "assistant", Parts: []AVPart{{Type: "text", Content: t.Text}}, Metadata: meta}}})
				case a2a.DataPart:
					outs = append(outs, out{"task_artifact", AVArtifactEvent{TaskID: task, Timestamp: ts,
						Artifact: avArtifact(string(e.Artifact.ID), t)}})
				}
			}
		case *a2a.Message:
			outs = append(outs, out{"task_message", AVMessageEvent{TaskID: task, Timestamp: ts, Message: avMessage(e)}})
		case *a2a.TaskStatusUpdateEvent:
			if e.Status.State == a2a.TaskStateCompleted && e.Status.Message != nil {
				// The agent's answer that ends its turn (agent.Reply): its
				// message, then the task's completed status.
				outs = append(outs, out{"task_message", AVMessageEvent{TaskID: task, Timestamp: ts, Message: avMessage(e.Status.Message)}})
				e.Status.Message = nil
			}
			st := r.statusEvent(e, f.IsFinal(), task, ts)
			if st.State == AVWorking {
				continue
			}
			outs = append(outs, out{"task_status", st})
		case *a2a.Task:
			outs = append(outs, out{"task_status", AVStatusEvent{TaskID: task, State: avState(e.Status.State), Timestamp: ts}})
		}
	}
	for i, o := range outs {
		id := ""
		if i == len(outs)-1 {
			id = r.idPrefix + render.SeqID(f)
		}
		if err := render.SSEEventJSON(r.o, id, o.event, o.data); err != nil {
			return err
		}
	}
	return nil
}

// statusEvent is the task_status event of e (a status-update of frame f,
// final: f is the turn's final frame) at ts: a terminal state a later
// turn takes back (later) is SUBMITTED, the task going on with it.
func (r *avStream) statusEvent(e *a2a.TaskStatusUpdateEvent, final bool, task, ts string) AVStatusEvent {
	if r.later != nil && final && e.Status.State.Terminal() {
		if r.nextTurn = r.later(); r.nextTurn != "" {
			e.Status.State = a2a.TaskStateSubmitted
		}
	}
	st := AVStatusEvent{TaskID: task, State: avState(e.Status.State), Timestamp: ts}
	if e.Status.Timestamp != nil {
		st.Timestamp = avTime(e.Status.Timestamp)
	}
	if e.Status.Message != nil {
		var b strings.Builder
		for _, p := range e.Status.Message.Parts {
			if tp, ok := p.(a2a.TextPart); ok {
				b.WriteString(tp.Text)
			}
		}
		if s := b.String(); s != "" {
			st.Message = &s
		}
	}
	return st
}

func (r *avStream) Heartbeat() error { return render.SSEComment(r.o, "keep-alive") }

func (r *avStream) End(err error) error {
	r.done = err == nil
	if err == nil && r.nextTurn != "" {
		return r.o.Flush() // the next turn may be long in coming
	}
	if err == nil {
		return nil
	}
	r.nextTurn = "" // nothing follows an error
	_, code := egress.Classify(err)
	return render.SSEEndEvent(r.o, "error", AVErrorEvent{Error: code, Message: err.Error()})
}

// AgentVaultTask translates an A2A task rebuilt by a2amap.BuildTask into the
// AgentVault Task shape: history and the final reply as messages (then a
// failure's message, or the question of a task waiting for input),
// data parts as artifacts. createdAt is the first request's envelope
// timestamp.
func AgentVaultTask(t *a2a.Task, createdAt string) AVTask {
	out := AVTask{ID: string(t.ID), State: avState(t.Status.State), CreatedAt: createdAt,
		UpdatedAt: avTime(t.Status.Timestamp), Messages: []AVMessage{}, Artifacts: []AVArtifact{}}
	if out.UpdatedAt == "" {
		out.UpdatedAt = createdAt
	}
	add := func(id string, role a2a.MessageRole, parts a2a.ContentParts, meta map[string]any) {
		var text a2a.ContentParts
		for _, p := range parts {
			if dp, ok := p.(a2a.DataPart); ok {
				out.Artifacts = append(out.Artifacts, avArtifact(id, dp))
				continue
			}
			text = append(text, p)
		}
		if len(text) > 0 {
			out.Messages = append(out.Messages, AVMessage{Role: avRole(role), Parts: avParts(text), Metadata: meta})
		}
	}
	// A stored task's "history":[null] or "artifacts":[null]: nothing to add.
	for _, m := range t.History {
		if m != nil {
			add(m.ID, m.Role, m.Parts, nil)
		}
	}
	for _, a := range t.Artifacts {
		if a != nil {
			add(string(a.ID), a2a.MessageRoleAgent, a.Parts, nil)
		}
	}
	// A failure's message, or the question of a task waiting for input
	// (input-required, auth-required: both INPUT_REQUIRED here).
	if t.Status.Message != nil && (t.Status.State == a2a.TaskStateFailed || t.Status.State == a2a.TaskStateCanceled || t.Status.State == a2a.TaskStateInputRequired || t.Status.State == a2a.TaskStateAuthRequired) {
		add(t.Status.Message.ID, a2a.MessageRoleAgent, t.Status.Message.Parts, t.Status.Message.Metadata)
	}
	return out
}
