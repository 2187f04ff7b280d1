package egress

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// A2AParams describes the A2A v0.3 call a response answers.
type A2AParams struct {
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
	// HistoryLength keeps the last N history messages of a Task (nil: all).
	HistoryLength *int
	// AcceptedOutputModes are the client's configuration.acceptedOutputModes
	// (empty: any). Without application/json (or a wildcard or +json type)
	// among them, DataParts are dropped from every event and result.
	AcceptedOutputModes []string
	// Interaction is set when the client declared the trpc interaction
	// spec (message metadata interaction_spec_version, or the
	// trpc-a2a-version extension in X-A2A-Extensions). Without it the
	// answer is basic A2A: no thought parts, no function_call or
	// function_response DataParts.
	Interaction bool
}

// acceptsData reports whether output modes modes admit DataParts.
func acceptsData(modes []string) bool {
	if len(modes) == 0 {
		return true
	}
	for _, m := range modes {
		if i := strings.IndexByte(m, ';'); i >= 0 {
			m = m[:i]
		}
		m = strings.ToLower(strings.TrimSpace(m))
		if m == "application/json" || m == "*/*" || m == "application/*" || strings.HasSuffix(m, "+json") {
			return true
		}
	}
	return false
}

// isData reports a DataPart.
func isData(p a2a.Part) bool {
	switch p.(type) {
	case a2a.DataPart, *a2a.DataPart:
		return true
	}
	return false
}

// isInteraction reports a part only trpc interaction-spec clients get: a
// thought TextPart, a function_call or function_response DataPart.
func isInteraction(p a2a.Part) bool {
	switch t := p.(type) {
	case a2a.TextPart:
		return t.Metadata[MetaThought] == true
	case a2a.DataPart:
		typ, _ := t.Metadata[MetaPartType].(string)
		return typ == e2a.ToolFunctionCall || typ == e2a.ToolFunctionResponse
	}
	return false
}

// partFilter returns the parts a client must not get (nil: all are
// sent): DataParts unless its output modes admit JSON, interaction-spec
// parts unless it declared the extension.
func (p A2AParams) partFilter() func(a2a.Part) bool {
	data, basic := !acceptsData(p.AcceptedOutputModes), !p.Interaction
	if !data && !basic {
		return nil
	}
	return func(pt a2a.Part) bool { return (data && isData(pt)) || (basic && isInteraction(pt)) }
}

// dropData drops DataParts (acceptedOutputModes without JSON).
func dropData(ev any) (any, bool) { return dropParts(ev, isData) }

func withoutParts(parts a2a.ContentParts, drop func(a2a.Part) bool) a2a.ContentParts {
	var out a2a.ContentParts
	for _, p := range parts {
		if !drop(p) {
			out = append(out, p)
		}
	}
	return out
}

func msgWithout(m *a2a.Message, drop func(a2a.Part) bool) *a2a.Message {
	if m == nil {
		return nil
	}
	c := *m
	c.Parts = withoutParts(m.Parts, drop)
	if len(c.Parts) == 0 {
		return nil
	}
	return &c
}

// dropParts returns ev without the parts drop reports, and false when
// nothing of the event is left to send.
func dropParts(ev any, drop func(a2a.Part) bool) (any, bool) {
	withoutData := func(parts a2a.ContentParts) a2a.ContentParts { return withoutParts(parts, drop) }
	msgWithoutData := func(m *a2a.Message) *a2a.Message { return msgWithout(m, drop) }
	switch e := ev.(type) {
	case *a2a.Message:
		m := msgWithoutData(e)
		return m, m != nil
	case *a2a.TaskArtifactUpdateEvent:
		if e.Artifact == nil {
			return e, true
		}
		c, a := *e, *e.Artifact
		a.Parts = withoutData(a.Parts)
		if len(a.Parts) == 0 && !e.LastChunk {
			return nil, false
		}
		c.Artifact = &a
		return &c, true
	case *a2a.TaskStatusUpdateEvent:
		c := *e
		c.Status.Message = msgWithoutData(e.Status.Message)
		return &c, true
	case *a2a.Task:
		c := *e
		c.Status.Message = msgWithoutData(e.Status.Message)
		c.History = nil
		for _, m := range e.History {
			if m2 := msgWithoutData(m); m2 != nil {
				c.History = append(c.History, m2)
			}
		}
		c.Artifacts = nil
		for _, a := range e.Artifacts {
			ac := *a
			if ac.Parts = withoutData(a.Parts); len(ac.Parts) > 0 {
				c.Artifacts = append(c.Artifacts, &ac)
			}
		}
		return &c, true
	}
	return ev, true
}

var (
	_ Renderer = (*a2aStream)(nil)
	_ Renderer = (*a2aSend)(nil)
)

// a2aStream renders message/stream and tasks/resubscribe: SSE whose data:
// is a JSON-RPC response object with an A2A event as result. The SSE id of
// the last event of each frame is the frame's sequence, so Last-Event-ID
// resumes after it.
type a2aStream struct {
	o         *Output
	p         A2AParams
	requestID string
	from      int64
	m         *a2aMapper
	rpcID     []byte // the JSON-RPC id as encoded, for textEvent
}

// NewA2AStream returns the A2A v0.3 SSE renderer for requestID from
// sequence from.
func NewA2AStream(o *Output, requestID string, p A2AParams, from int64) Renderer {
	return &a2aStream{o: o, p: p, requestID: requestID, from: from, m: newStreamMapper(requestID, p, from)}
}

// newStreamMapper is the mapper of a stream of requestID's events.
func newStreamMapper(requestID string, p A2AParams, from int64) *a2aMapper {
	m := newA2AMapper(p, from)
	m.requestID = requestID
	if !p.Resubscribe && from == 0 {
		// The submitted status-update goes out before any frame: its ids
		// are fixed now (ingress passes the task's ids).
		if m.taskID == "" {
			m.taskID = a2a.TaskID(requestID)
		}
		if m.contextID == "" {
			m.contextID = string(m.taskID)
		}
	}
	return m
}

func (r *a2aStream) Start() error {
	s := sse{r.o}
	s.head(0)
	if err := s.comment("ok"); err != nil {
		return err
	}
	if r.from > 0 {
		return nil
	}
	if r.p.Resubscribe {
		// A resubscribed stream opens with the task's state too (working;
		// the replayed frames then move it on), never with a later event.
		ts := now().UTC()
		return s.eventJSON("", "", jsonrpc.ResultResponse(r.p.JSONRPCID, r.m.statusUpdate(a2a.TaskStateWorking, &ts, nil, false)))
	}
	ts := r.p.Submitted
	if ts.IsZero() {
		ts = now()
	}
	ts = ts.UTC()
	return s.eventJSON("", "", jsonrpc.ResultResponse(r.p.JSONRPCID, r.m.statusUpdate(a2a.TaskStateSubmitted, &ts, nil, false)))
}

func (r *a2aStream) Frame(f *Frame) error {
	if b, ok := r.textEvent(f); ok {
		return sse{r.o}.event(seqID(f), "", b)
	}
	resp, err := f.Decoded()
	if err != nil {
		return err
	}
	evs, err := r.m.events(resp)
	if err != nil {
		return err
	}
	if drop := r.p.partFilter(); drop != nil {
		var kept []a2a.Event
		for _, ev := range evs {
			if e, ok := dropParts(ev, drop); ok {
				kept = append(kept, e.(a2a.Event))
			}
		}
		evs = kept
	}
	s := sse{r.o}
	if len(evs) == 0 {
		// Nothing of the frame is for this client.
		return nil
	}
	for i, ev := range evs {
		id := ""
		if i == len(evs)-1 {
			id = seqID(f)
		}
		if err := s.eventJSON(id, "", jsonrpc.ResultResponse(r.p.JSONRPCID, ev)); err != nil {
			return err
		}
	}
	return nil
}

func (r *a2aStream) Heartbeat() error { return sse{r.o}.comment("keep-alive") }

func (r *a2aStream) End(err error) error {
	if err == nil {
		return nil
	}
	s := sse{r.o}
	if !r.o.Started() {
		s.head(0)
	}
	return s.eventJSON("", "", jsonrpc.ErrorResponse(r.p.JSONRPCID, A2AError(err)))
}

// a2aSend renders message/send: one JSON-RPC response whose result is a
// Message (the agent answered with one message) or a Task (several: the
// intermediate messages in history, the final reply in artifacts). While
// it waits it writes blank lines, which JSON decoders skip.
type a2aSend struct {
	o   *Output
	p   A2AParams
	agg *a2aAggregator
}

// NewA2ASend returns the A2A message/send renderer.
func NewA2ASend(o *Output, requestID string, p A2AParams) Renderer {
	return &a2aSend{o: o, p: p, agg: newA2AAggregator(requestID, p)}
}

func (r *a2aSend) Start() error {
	r.o.Header().Set("Content-Type", "application/json")
	r.o.Header().Set("Cache-Control", "no-cache")
	return nil
}

func (r *a2aSend) Frame(f *Frame) error {
	resp, err := f.Decoded()
	if err != nil {
		return err
	}
	return r.agg.add(resp)
}

func (r *a2aSend) Heartbeat() error {
	_, err := r.o.WriteString("\n")
	return err
}

func (r *a2aSend) End(err error) error {
	if err != nil {
		return r.writeRPC(jsonrpc.ErrorResponse(r.p.JSONRPCID, A2AError(err)))
	}
	res := r.agg.result(r.p.HistoryLength)
	if drop := r.p.partFilter(); drop != nil {
		if e, ok := dropParts(res, drop); ok {
			res = e.(a2a.SendMessageResult)
		} else {
			// A reply of dropped parts only: the task, whose artifacts are
			// then empty.
			e, _ := dropParts(r.agg.task(r.p.HistoryLength, true), drop)
			res = e.(a2a.SendMessageResult)
		}
	}
	return r.writeRPC(jsonrpc.ResultResponse(r.p.JSONRPCID, res))
}

func (r *a2aSend) writeRPC(v jsonrpc.Response) error {
	r.o.Header().Set("Content-Type", "application/json")
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = r.o.Write(append(b, '\n'))
	return err
}

// aggMsg is one agent message being assembled from frames.
type aggMsg struct {
	group   string
	llm     string
	msg     *a2a.Message
	thought strings.Builder
	text    strings.Builder
	texts   bool
}

// a2aAggregator assembles the frames of one request into the A2A result of
// message/send (trpc "Non-streaming" rules) and the pieces of a Task.
type a2aAggregator struct {
	m         *a2aMapper
	msgs      []*aggMsg
	state     a2a.TaskState
	status    *a2a.Message
	ts        *time.Time
	artifacts []*a2a.Artifact
	native    a2a.SendMessageResult
}

func newA2AAggregator(requestID string, p A2AParams) *a2aAggregator {
	m := newA2AMapper(p, 0)
	m.requestID = requestID
	return &a2aAggregator{m: m, state: a2a.TaskStateSubmitted}
}

func (a *a2aAggregator) newMsg(r *e2a.Response, group, llm string, p piece) *aggMsg {
	metaLLM := llm
	if metaLLM == "" {
		metaLLM = r.ResponseID
	}
	am := &aggMsg{group: group, llm: llm, msg: &a2a.Message{ID: r.ResponseID, Role: a2a.MessageRoleAgent,
		ContextID: a.m.contextID, Metadata: p.meta(metaLLM)}}
	if group == "content" {
		am.msg.Metadata[MetaObjectType] = ObjectChatCompletion
	}
	a.msgs = append(a.msgs, am)
	return am
}

func (a *a2aAggregator) add(r *e2a.Response) error {
	a.m.bind(r)
	if a.state == a2a.TaskStateSubmitted {
		a.state = a2a.TaskStateWorking
	}
	a.ts = FrameTime(r)
	if c, ok := ContentChunk(r); ok {
		if p, ok := chunkPiece(c); ok {
			a.addPiece(r, p)
		}
	} else {
		ev, err := nativeEvents(r)
		if err != nil {
			return err
		}
		switch e := ev.(type) {
		case *a2a.Task:
			a.state, a.status = e.Status.State, e.Status.Message
			a.artifacts = append(a.artifacts, e.Artifacts...)
			if r.IsFinal {
				a.native = e
			}
		case *a2a.Message:
			if r.IsFinal {
				a.native = e
			} else {
				a.msgs = append(a.msgs, &aggMsg{group: "native", msg: e})
			}
		case *a2a.TaskStatusUpdateEvent:
			a.state, a.status = e.Status.State, e.Status.Message
			if e.Status.Timestamp != nil {
				a.ts = e.Status.Timestamp
			}
		case *a2a.TaskArtifactUpdateEvent:
			a.mergeArtifact(e)
		}
	}
	if !r.IsFinal || a.native != nil {
		return nil
	}
	o := FinalOutcome(r)
	a.state = o.State
	if o.State != a2a.TaskStateCompleted {
		a.status = a.m.failureMessage(r, o)
		return nil
	}
	if o.HasResult && !a.hasContent() {
		if parts := resultParts(o.Result); len(parts) > 0 {
			am := a.newMsg(r, "content", llmID(r), piece{objectType: ObjectChatCompletion})
			am.msg.Parts = parts
		}
	}
	return nil
}

func (a *a2aAggregator) hasContent() bool {
	for _, m := range a.msgs {
		if m.group == "content" {
			return true
		}
	}
	return false
}

func (a *a2aAggregator) addPiece(r *e2a.Response, p piece) {
	llm := llmID(r)
	var cur *aggMsg
	if n := len(a.msgs); n > 0 && a.msgs[n-1].group == p.group && a.msgs[n-1].llm == llm && p.group != "code" && p.group != "other" {
		cur = a.msgs[n-1]
	} else {
		cur = a.newMsg(r, p.group, llm, p)
	}
	if p.group == "content" {
		for _, part := range p.parts {
			if tp, ok := part.(a2a.TextPart); ok {
				if p.thought {
					cur.thought.WriteString(tp.Text)
				} else {
					cur.text.WriteString(tp.Text)
					cur.texts = true
				}
			}
		}
		return
	}
	cur.msg.Parts = append(cur.msg.Parts, p.parts...)
}

func (a *a2aAggregator) mergeArtifact(e *a2a.TaskArtifactUpdateEvent) {
	if e.Artifact == nil {
		return
	}
	for _, art := range a.artifacts {
		if art.ID == e.Artifact.ID && e.Append {
			art.Parts = append(art.Parts, e.Artifact.Parts...)
			return
		}
	}
	c := *e.Artifact
	a.artifacts = append(a.artifacts, &c)
}

// seal writes the assembled text of content messages into their parts.
func (a *a2aAggregator) seal() {
	for _, m := range a.msgs {
		if m.group != "content" || (m.thought.Len() == 0 && !m.texts) {
			continue
		}
		var parts a2a.ContentParts
		if m.thought.Len() > 0 {
			parts = append(parts, a2a.TextPart{Text: m.thought.String(), Metadata: map[string]any{MetaThought: true}})
		}
		if m.texts {
			parts = append(parts, a2a.TextPart{Text: m.text.String()})
		}
		m.msg.Parts = append(parts, m.msg.Parts...)
		m.thought.Reset()
		m.text.Reset()
		m.texts = false
	}
}

// result returns the message/send result.
func (a *a2aAggregator) result(historyLength *int) a2a.SendMessageResult {
	a.m.bind(&e2a.Response{RequestID: a.m.requestID})
	if a.native != nil {
		return a.native
	}
	a.seal()
	if a.state == a2a.TaskStateCompleted && len(a.msgs) == 1 && a.msgs[0].group == "content" && len(a.artifacts) == 0 {
		return a.msgs[0].msg
	}
	return a.task(historyLength, true)
}

// task returns the pieces of this request as a Task: with finalReply, the
// last content message of a completed request becomes the artifact.
func (a *a2aAggregator) task(historyLength *int, finalReply bool) *a2a.Task {
	a.m.bind(&e2a.Response{RequestID: a.m.requestID})
	a.seal()
	t := &a2a.Task{ID: a.m.taskID, ContextID: a.m.contextID,
		Status: a2a.TaskStatus{State: a.state, Timestamp: a.ts, Message: a.status}}
	history, arts := a.history(finalReply)
	t.History = trimHistory(history, historyLength)
	t.Artifacts = append(append([]*a2a.Artifact(nil), a.artifacts...), arts...)
	return t
}

// history returns the agent messages, and the final reply as an artifact
// when finalReply and the request completed with a content message last.
func (a *a2aAggregator) history(finalReply bool) ([]*a2a.Message, []*a2a.Artifact) {
	var history []*a2a.Message
	var arts []*a2a.Artifact
	last := -1
	if finalReply && a.state == a2a.TaskStateCompleted {
		for i := len(a.msgs) - 1; i >= 0; i-- {
			if a.msgs[i].group == "content" {
				last = i
				break
			}
		}
	}
	for i, m := range a.msgs {
		msg := *m.msg
		msg.TaskID = a.m.taskID
		if i != last {
			history = append(history, &msg)
			continue
		}
		var thoughts, reply a2a.ContentParts
		for _, p := range msg.Parts {
			if tp, ok := p.(a2a.TextPart); ok && tp.Metadata[MetaThought] == true {
				thoughts = append(thoughts, p)
			} else {
				reply = append(reply, p)
			}
		}
		if len(thoughts) > 0 {
			tm := msg
			tm.Parts = thoughts
			history = append(history, &tm)
		}
		id := a2a.ArtifactID(m.llm)
		if id == "" {
			id = a2a.ArtifactID(msg.ID)
		}
		arts = append(arts, &a2a.Artifact{ID: id, Parts: reply})
	}
	return history, arts
}

func trimHistory(h []*a2a.Message, n *int) []*a2a.Message {
	if n == nil || *n < 0 || len(h) <= *n {
		return h
	}
	return h[len(h)-*n:]
}

// A2ARequest is one request of a task, for rebuilding the task: its
// envelope and its frames (in order, possibly without a final frame).
type A2ARequest struct {
	Envelope *e2a.Envelope
	Frames   []*e2a.Response
}

// BuildA2ATask rebuilds an A2A Task from the requests of the task, in
// order (tasks/get): each request's user message (from its envelope) and
// agent messages in history, the last request's final reply in artifacts,
// the state of the last request (submitted when it has no frame, working
// while it runs). historyLength keeps the last N history messages.
func BuildA2ATask(taskID, contextID string, reqs []A2ARequest, historyLength *int) *a2a.Task {
	t := &a2a.Task{ID: a2a.TaskID(taskID), ContextID: contextID, Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
	var history []*a2a.Message
	for i, rq := range reqs {
		id := ""
		if rq.Envelope != nil {
			id = rq.Envelope.RequestID
			if t.ContextID == "" {
				t.ContextID = rq.Envelope.ContextID
			}
		}
		if t.ContextID == "" {
			t.ContextID = taskID
		}
		agg := newA2AAggregator(id, A2AParams{TaskID: taskID, ContextID: t.ContextID})
		if rq.Envelope != nil {
			if um := userMessage(rq.Envelope, a2a.TaskID(taskID), t.ContextID); um != nil {
				history = append(history, um)
			}
		}
		for _, f := range rq.Frames {
			if err := agg.add(f); err != nil {
				continue
			}
		}
		lastReq := i == len(reqs)-1
		if agg.native != nil {
			switch n := agg.native.(type) {
			case *a2a.Message:
				m := *n
				agg.msgs = append(agg.msgs, &aggMsg{group: "content", msg: &m})
			case *a2a.Task:
				history = append(history, n.History...)
				if lastReq {
					t.Artifacts = append(t.Artifacts, n.Artifacts...)
				}
			}
		}
		agg.seal()
		h, arts := agg.history(lastReq)
		history = append(history, h...)
		if lastReq {
			t.Artifacts = append(t.Artifacts, agg.artifacts...)
			t.Artifacts = append(t.Artifacts, arts...)
			t.Status = a2a.TaskStatus{State: agg.state, Timestamp: agg.ts, Message: agg.status}
			if n, ok := agg.native.(*a2a.Task); ok {
				t.Status = n.Status
			}
			if len(rq.Frames) == 0 {
				t.Status.State = a2a.TaskStateSubmitted
			}
		}
	}
	t.History = trimHistory(history, historyLength)
	return t
}

// userMessage returns the user message of a request: params.message when
// it is an A2A message, else the text of params.text/content/query.
func userMessage(env *e2a.Envelope, taskID a2a.TaskID, contextID string) *a2a.Message {
	if mv, ok := env.Params["message"].(map[string]any); ok {
		if ev, err := decodeA2AEvent("message", mv); err == nil {
			if m, ok := ev.(*a2a.Message); ok {
				m.TaskID, m.ContextID = taskID, contextID
				if m.Role == "" {
					m.Role = a2a.MessageRoleUser
				}
				return m
			}
		}
	}
	for _, k := range []string{"text", "content", "query"} {
		if s := env.ParamString(k); s != "" {
			id := env.MessageID
			if id == "" {
				id = env.RequestID
			}
			return &a2a.Message{ID: id, Role: a2a.MessageRoleUser, TaskID: taskID, ContextID: contextID,
				Parts: a2a.ContentParts{a2a.TextPart{Text: s}}}
		}
	}
	return nil
}
