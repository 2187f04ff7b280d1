package a2a

import (
	"cmp"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

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
	Type    string `json:"type"`
	Content any    `json:"content"`
	// URL is a file part's url, the member the profile's clients (and
	// the normalizer) read; Content repeats it for the clients that read
	// it there.
	URL      string `json:"url,omitempty"`
	MimeType string `json:"mediaType,omitempty"`
	// Filename is a file part's name.
	Filename string `json:"filename,omitempty"`
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
// {type: data, content}, file → {type: file, url (and content: the uri),
// or content: the bytes (base64); mediaType, filename}, the members the
// normalizer reads in a file part.
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
				out = append(out, AVPart{Type: "file", Content: f.URI, URL: f.URI, MimeType: f.MimeType, Filename: f.Name})
			case a2a.FileBytes:
				out = append(out, AVPart{Type: "file", Content: f.Bytes, MimeType: f.MimeType, Filename: f.Name})
			}
		}
	}
	return out
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
	if typ == "tool_response" {
		// The call's result: an artifact of its own, not an update of
		// the call's (a client keeps one artifact per id).
		id += "/response"
	}
	return AVArtifact{ID: id, Type: typ, Content: p.Data, MediaType: "application/json", Metadata: p.Metadata}
}

var _ render.Renderer = (*avStream)(nil)

// avStream renders tasks/sendSubscribe: SSE with event: task_status |
// task_message | task_artifact | error, so that what a client rebuilds
// from the events is what tasks/get answers (AgentVaultTask): a
// task_message is a message added (the profile's TaskMessageEvent), so
// the text the agent streams is one task_message per message, written
// when the message ends, not one per chunk: the reasoning and the answer
// text of one model response (a run of text chunks of one
// llm_response_id, as a2amap's aggregation merges them) are held together
// and written when the run ends (another model response, a data part, a
// status, the end of the stream) as tasks/get has them, the reasoning
// (metadata thought=true), then the answer, however their chunks
// interleave; an agent's own artifact's text is a message per run of one
// kind; tool calls and other data are task_artifact (avArtifact); the end
// a task_status COMPLETED, FAILED, CANCELED or INPUT_REQUIRED, after the
// agent's message that ends the turn (its reply, question or failure) as
// a task_message.
type avStream struct {
	o       *render.Output
	p       AgentVaultParams
	m       *a2amap.Mapper
	working bool
	// later is the turn the task's record lists after this one, read at
	// a final status that ends the task or the turn (terminal, interrupted:
	// TakenBack; nil: not read); nextTurn is the
	// one found: that status is written SUBMITTED and the stream goes on
	// with it (serveAgentVault). continued: the stream goes on from an
	// earlier turn's (its head written); idPrefix precedes its event ids.
	later     func() string
	nextTurn  string
	continued bool
	idPrefix  string
	done      bool // ended without an error
	// held are the messages whose text is still streaming, the
	// reasoning (held[0]) and the answer (held[1]) of the run heldKey
	// (runKey); prevID is the id of the frame before the one rendered
	// (the last one once rendered): the messages written at a frame hold
	// the text of the frames before it, and the last carries their id, so
	// that a resumption after it does not repeat them.
	held    [2]avHeld
	heldKey string
	prevID  string
	// heldNow: a held message has text of the frame being rendered, whose
	// id comes after prevID: flushed then, it carries no id of its own.
	heldNow bool
	// chunkLLM is the llm_response_id of the frame rendered when it is a
	// content chunk (chunk: a2amap.ContentChunk), whose text is held by
	// model response.
	chunkLLM string
	chunk    bool
	outs     []avOut
}

// avHeld is a message whose text is still streaming (ev nil: none).
type avHeld struct {
	ev   *AVMessageEvent
	text strings.Builder // ev's text so far (its part's content once flushed)
}

// avOut is one event of a frame; id, when set, is its own (a message of
// the frames before).
type avOut struct {
	event string
	data  any
	id    string
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
	// The id of a data part's artifact: tasks/get's (the message of an
	// E2A chunk has the frame's response id, an agent's own artifact its
	// id).
	dataID := ""
	_, r.chunk = a2amap.ContentChunk(resp)
	r.chunkLLM = ""
	if r.chunk {
		dataID, r.chunkLLM = resp.ResponseID, a2amap.LLMResponseID(resp)
	}
	r.outs = r.outs[:0]
	if !r.working {
		r.working = true
		r.add("task_status", AVStatusEvent{TaskID: r.m.TaskID(), State: AVWorking, Timestamp: ts})
	}
	for _, v := range evs {
		// The profile follows A2A's events in v0.3 (its edge).
		ev, err := a2amap.V03Event(v, false)
		if err != nil {
			return err
		}
		r.event(ev, f.IsFinal(), dataID, ts)
	}
	if f.IsFinal() {
		// The held answer keeps the id of the frames its text is from
		// (flush), so that a client cut between it and the final status
		// resumes after it and gets the end only; it had none, the status's
		// event the turn's only id, and a client that had the answer got it
		// again. Resumed after it, the mapper knows of the streamed text
		// (Prime): the final frame's result is not sent as the answer.
		r.flush()
	}
	id := r.idPrefix + render.SeqID(f)
	for i, o := range r.outs {
		if o.id == "" && i == len(r.outs)-1 && !r.holding() {
			// Nothing of this frame waits: a resumption goes on after it.
			o.id = id
		}
		if err := render.SSEEventJSON(r.o, o.id, o.event, o.data); err != nil {
			return err
		}
	}
	r.prevID, r.heldNow = id, false
	return nil
}

func (r *avStream) add(event string, data any) {
	r.outs = append(r.outs, avOut{event: event, data: data})
}

// holding reports whether a message's text is held.
func (r *avStream) holding() bool { return r.held[0].ev != nil || r.held[1].ev != nil }

// flush adds the messages still streaming, the reasoning then the answer,
// the last with the id of the frames their text is from (a resumption
// after it has both; one before it, the frames of both).
func (r *avStream) flush() {
	last := len(r.outs)
	for i := range r.held {
		h := &r.held[i]
		if h.ev == nil {
			continue
		}
		h.ev.Message.Parts[0].Content = h.text.String()
		last = len(r.outs)
		r.outs = append(r.outs, avOut{event: "task_message", data: *h.ev})
		h.ev = nil
		h.text.Reset()
	}
	if last < len(r.outs) && !r.heldNow {
		r.outs[last].id = r.prevID
	}
	r.heldKey, r.heldNow = "", false
}

// parts adds the agent's parts of id (avAgentParts): a message or an
// artifact each.
func (r *avStream) parts(id string, parts a2a.ContentParts, meta map[string]any, ts string) {
	r.flush()
	task := r.m.TaskID()
	avAgentParts(id, parts, meta, func(m AVMessage) {
		r.add("task_message", AVMessageEvent{TaskID: task, Timestamp: ts, Message: m})
	}, func(a AVArtifact) {
		r.add("task_artifact", AVArtifactEvent{TaskID: task, Timestamp: ts, Artifact: a})
	})
}

// text adds streamed text of the artifact id to the message of its kind
// held for its run (runKey), the messages held for another run written
// first.
func (r *avStream) text(id string, t a2a.TextPart, ts string) {
	thought := avThought(t)
	if key := r.runKey(id, thought); key != r.heldKey {
		r.flush()
		r.heldKey = key
	}
	h := &r.held[1]
	if thought {
		h = &r.held[0]
	}
	if h.ev == nil {
		h.ev = &AVMessageEvent{TaskID: r.m.TaskID(),
			Message: AVMessage{Role: "assistant", Parts: []AVPart{{Type: "text"}}, Metadata: avMeta(thought, nil)}}
	}
	h.text.WriteString(t.Text)
	h.ev.Timestamp = ts
	r.heldNow = true
}

// runKey is the run of messages text of the artifact id (thought: its
// kind) is held in: a content chunk's, its model response (its
// llm_response_id, "" for none: a2amap's aggregation merges the
// reasoning and the answer text of one response, however they
// interleave, until another piece comes); an agent's own artifact's, the
// artifact and the kind (its parts in order, as AgentVaultTask reads
// them: avAgentParts).
func (r *avStream) runKey(id string, thought bool) string {
	if r.chunk {
		return "llm\x00" + r.chunkLLM
	}
	return "artifact\x00" + id + "\x00" + strconv.FormatBool(thought)
}

// event adds the events of ev, an event of a frame (final: the turn's
// last) at ts.
func (r *avStream) event(ev a2a.Event, final bool, dataID, ts string) {
	switch e := ev.(type) {
	case *a2a.TaskArtifactUpdateEvent:
		if e.Artifact == nil {
			return
		}
		id := string(e.Artifact.ID)
		for _, p := range e.Artifact.Parts {
			if t, ok := p.(a2a.TextPart); ok {
				r.text(id, t, ts)
				continue
			}
			r.parts(cmp.Or(dataID, id), a2a.ContentParts{p}, nil, ts)
		}
	case *a2a.Message:
		r.parts(e.ID, e.Parts, e.Metadata, ts)
	case *a2a.TaskStatusUpdateEvent:
		r.flush()
		if m := e.Status.Message; m != nil && (e.Status.State == a2a.TaskStateCompleted || avSaid(e.Status.State)) {
			// The agent's message that ends its turn: its answer
			// (agent.Reply), its question, its failure; then the status.
			r.parts(m.ID, m.Parts, m.Metadata, ts)
			if e.Status.State == a2a.TaskStateCompleted {
				e.Status.Message = nil
			}
		}
		st := r.statusEvent(e, final, r.m.TaskID(), ts)
		if st.State != AVWorking {
			r.add("task_status", st)
		}
	case *a2a.Task:
		r.flush()
		r.add("task_status", AVStatusEvent{TaskID: r.m.TaskID(), State: avState(e.Status.State), Timestamp: ts})
	}
}

// statusEvent is the task_status event of e (a status-update of frame f,
// final: f is the turn's final frame) at ts: a terminal or interrupted
// state a later turn takes back (later, TakenBack) is SUBMITTED, the
// task going on with it.
func (r *avStream) statusEvent(e *a2a.TaskStatusUpdateEvent, final bool, task, ts string) AVStatusEvent {
	if r.later != nil && final && TakenBack(a2av0.ToV1TaskState(e.Status.State)) {
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

// A resumed stream learns what the client saw before its resume point
// (Prime).
var _ render.Primer = (*avStream)(nil)

// Prime is render.Primer: a frame before the resume point (the client
// has its events) is given to the mapper, so that the final frame's result
// is not sent again as the answer to a client that has the streamed text.
// Nothing of it is held: a message's text is written under the id of its
// last frame, never before it.
func (r *avStream) Prime(f *render.Frame) error { return primeMapper(r.m, f) }

func (r *avStream) End(err error) error {
	r.done = err == nil
	// The message still streaming, when the turn did not end: what the
	// task holds of it. Not when the stream breaks (err): the client
	// resumes after the last id it has and gets the whole message then,
	// not its rest as a second one.
	r.outs = r.outs[:0]
	if err == nil {
		r.flush()
	}
	for _, o := range r.outs {
		if werr := render.SSEEventJSON(r.o, o.id, o.event, o.data); werr != nil && err == nil {
			return werr
		}
	}
	if err == nil && r.nextTurn != "" {
		return r.o.Flush() // the next turn may be long in coming
	}
	if err == nil {
		return nil
	}
	r.nextTurn = "" // nothing follows an error
	_, code := egress.Classify(err)
	return render.SSEEndEvent(r.o, "error", AVErrorEvent{Error: code, Message: egress.ClientMessage(err)})
}

// AgentVaultTask translates an A2A task rebuilt by a2amap.BuildTask into the
// AgentVault Task shape, as the stream of its turns shows it (avStream):
// the user's messages and the agent's (avAgentParts: its reasoning, its
// answers, each a message; data parts artifacts), then a failure's
// message, or the question of a task waiting for input. createdAt is the
// first request's envelope timestamp, written as updatedAt and the
// events' timestamps are (UTC, "Z": avTime; the envelope's is "+00:00").
func AgentVaultTask(t *a2a.Task, createdAt string) AVTask {
	if ts, err := e2a.ParseTime(createdAt); err == nil {
		createdAt = avTime(&ts)
	}
	out := AVTask{ID: string(t.ID), State: avState(t.Status.State), CreatedAt: createdAt,
		UpdatedAt: avTime(t.Status.Timestamp), Messages: []AVMessage{}, Artifacts: []AVArtifact{}}
	if out.UpdatedAt == "" {
		out.UpdatedAt = createdAt
	}
	msg := func(m AVMessage) { out.Messages = append(out.Messages, m) }
	art := func(a AVArtifact) { out.Artifacts = append(out.Artifacts, a) }
	// A completed turn's reply is an artifact of the id of its model
	// response, whose reasoning stays in history: the reply follows the
	// last of those, as the stream has it.
	replies := avReplies(t)
	done := map[*a2a.Artifact]bool{}
	// A stored task's "history":[null] or "artifacts":[null]: nothing to add.
	for i, m := range t.History {
		switch {
		case m == nil:
		case m.Role == a2a.MessageRoleUser:
			avUserParts(m.Parts, m.Metadata, msg)
		default:
			avAgentParts(m.ID, m.Parts, m.Metadata, msg, art)
		}
		if a := replies[i]; a != nil {
			done[a] = true
			avAgentParts(string(a.ID), a.Parts, nil, msg, art)
		}
	}
	for _, a := range t.Artifacts {
		if a != nil && !done[a] {
			avAgentParts(string(a.ID), a.Parts, nil, msg, art)
		}
	}
	// A failure's message, or the question of a task waiting for input
	// (input-required, auth-required: both INPUT_REQUIRED here).
	if t.Status.Message != nil && avSaid(t.Status.State) {
		avAgentParts(t.Status.Message.ID, t.Status.Message.Parts, t.Status.Message.Metadata, msg, art)
	}
	return out
}

// avReplies maps the index of a history message to the reply artifact
// that follows it: an artifact of text only whose id is the model
// response (metadata llm_response_id) of agent messages with text in
// history follows the last of them.
func avReplies(t *a2a.Task) map[int]*a2a.Artifact {
	last := map[string]int{}
	for i, m := range t.History {
		if m == nil || m.Role == a2a.MessageRoleUser {
			continue
		}
		llm, _ := m.Metadata[a2amap.MetaLLMResponseID].(string)
		if llm != "" && avHasText(m.Parts) {
			last[llm] = i
		}
	}
	out := map[int]*a2a.Artifact{}
	for _, a := range t.Artifacts {
		if a == nil || !avHasText(a.Parts) {
			continue
		}
		i, ok := last[string(a.ID)]
		if !ok || out[i] != nil {
			continue
		}
		textOnly := true
		for _, p := range a.Parts {
			if _, ok := p.(a2a.TextPart); !ok {
				textOnly = false
			}
		}
		if textOnly {
			out[i] = a
		}
	}
	return out
}

// avHasText reports whether parts hold a text part.
func avHasText(parts a2a.ContentParts) bool {
	for _, p := range parts {
		if _, ok := p.(a2a.TextPart); ok {
			return true
		}
	}
	return false
}

// avSaid reports whether the message of a turn's status in state s is
// one of the task's messages: a failure's, a rejection's (FAILED in the
// profile, whose view has no status message: its reason was lost), a
// cancel's, a question.
func avSaid(s a2a.TaskState) bool {
	switch s {
	case a2a.TaskStateFailed, a2a.TaskStateRejected, a2a.TaskStateCanceled, a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired:
		return true
	}
	return false
}

// avThought reports whether t is reasoning.
func avThought(t a2a.TextPart) bool { return t.Metadata[a2amap.MetaThought] == true }

// avMeta is the metadata of an agent message: {"thought": true} for
// reasoning, else the error a failure's message carries in meta (A2A
// message metadata), else none.
func avMeta(thought bool, meta map[string]any) map[string]any {
	if thought {
		return map[string]any{a2amap.MetaThought: true}
	}
	if e, ok := meta["error"]; ok {
		return map[string]any{"error": e}
	}
	return nil
}

// avUserParts adds a user message, all its parts (data parts as
// {type: data, content}: avParts) and the metadata it was sent with (the
// profile's Message.metadata, an mcp_context: the envelope's
// a2a_metadata; it was shown null). Its data parts were shown as artifacts
// under the task's id, as if the agent had made them, and a message of
// data parts only was missing from the messages.
func avUserParts(parts a2a.ContentParts, meta map[string]any, msg func(AVMessage)) {
	if len(parts) > 0 {
		msg(AVMessage{Role: "user", Parts: avParts(parts), Metadata: meta})
	}
}

// avAgentParts adds the agent's parts of a message or artifact of id, in
// order, as the AgentVault view shows them: each run of text and file
// parts of one kind (reasoning, answer) one message, its text one part
// (metadata thought for reasoning); each data part an artifact
// (avArtifact). meta is the A2A message's metadata (avMeta).
func avAgentParts(id string, parts a2a.ContentParts, meta map[string]any, msg func(AVMessage), art func(AVArtifact)) {
	var run []AVPart
	thought := false
	end := func() {
		if len(run) > 0 {
			msg(AVMessage{Role: "assistant", Parts: run, Metadata: avMeta(thought, meta)})
		}
		run = nil
	}
	for _, p := range parts {
		switch t := p.(type) {
		case a2a.DataPart:
			end()
			art(avArtifact(id, t))
		case a2a.TextPart:
			if th := avThought(t); th != thought || len(run) == 0 {
				end()
				thought = th
			}
			if n := len(run); n > 0 && run[n-1].Type == "text" {
				run[n-1].Content = run[n-1].Content.(string) + t.Text
				continue
			}
			run = append(run, AVPart{Type: "text", Content: t.Text})
		default:
			if thought {
				end()
				thought = false
			}
			run = append(run, avParts(a2a.ContentParts{p})...)
		}
	}
	end()
}
