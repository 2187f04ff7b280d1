package acp

// The ACP mapping of frames (spec §8, §12.6): the session updates a frame
// stands for, the JSON-RPC response ending a turn, and the text fast path
// of a plain text chunk's notification. The renderer, session/load and
// the L3 projections (package protocols) share it.

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/render"
)

// Updates returns the ACP session updates a frame stands for: e2a.chunk
// text → agent_message_chunk, reasoning → agent_thought_chunk, tool
// function_call → tool_call, function_response → tool_call_update, custom
// {type: plan, entries} → plan; acpsdk.session_update frames as they are
// (one of a kind the SDK does not know gives none: decodeUpdate); a2a.*
// frames through their parts. Frames without content give none. A
// tool call the agent gave no id gets one of its frame (callID); a result
// without an id keeps none (openCalls.updates finds its call).
func Updates(r *e2a.Response) ([]acpsdk.SessionUpdate, error) {
	switch r.ResponseKind {
	case e2a.KindChunk:
		c, err := r.Chunk()
		if err != nil {
			return nil, err
		}
		if u, ok := chunkUpdate(c); ok {
			return nameCalls(r, []acpsdk.SessionUpdate{u}), nil
		}
		return nil, nil
	case e2a.KindACPSessionUpd:
		body, err := r.BodyMap()
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(a2amap.ACPUpdate(body))
		u, err := decodeUpdate(b)
		if errors.Is(err, errUnknownUpdate) {
			return nil, nil // as the A2A doors and a client of this ACP skip it
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s body: %v", egress.ErrInvalidFrame, e2a.KindACPSessionUpd, err)
		}
		return []acpsdk.SessionUpdate{u}, nil
	case e2a.KindA2AStreamEvent, e2a.KindA2ATask, e2a.KindA2AMessage:
		ev, err := a2amap.NativeEvent(r)
		if err != nil || ev == nil {
			return nil, err
		}
		var out []acpsdk.SessionUpdate
		for _, p := range eventParts(ev) {
			if u, ok := partUpdate(p); ok {
				out = append(out, u)
			}
		}
		return nameCalls(r, out), nil
	}
	return nil, nil
}

// chunkUpdate maps one e2a.chunk body to an ACP session update.
func chunkUpdate(c e2a.ChunkBody) (acpsdk.SessionUpdate, bool) {
	switch c.DeltaKind {
	case e2a.DeltaText:
		return acpsdk.UpdateAgentMessageText(a2amap.DeltaText(c.Delta)), true
	case e2a.DeltaReasoning:
		return acpsdk.UpdateAgentThoughtText(a2amap.DeltaText(c.Delta)), true
	}
	obj, ok := a2amap.AsMap(c.Delta)
	if !ok {
		return acpsdk.SessionUpdate{}, false
	}
	typ, _ := obj["type"].(string)
	id, _ := obj["id"].(string)
	name, _ := obj["name"].(string)
	switch typ {
	case e2a.ToolFunctionCall:
		return acpsdk.StartToolCall(acpsdk.ToolCallId(id), name, acpsdk.WithStartKind(acpsdk.ToolKindOther),
			acpsdk.WithStartStatus(acpsdk.ToolCallStatusInProgress), acpsdk.WithStartRawInput(rawJSON(obj["args"]))), true
	case e2a.ToolFunctionResponse:
		status, failed := acpsdk.ToolCallStatusCompleted, responseFailed(obj["response"])
		if failed {
			status = acpsdk.ToolCallStatusFailed
		}
		opts := []acpsdk.ToolCallUpdateOpt{acpsdk.WithUpdateStatus(status), acpsdk.WithUpdateRawOutput(rawJSON(obj["response"]))}
		if text := toolOutputText(obj["response"], failed); text != "" {
			opts = append(opts, textContent(text))
		}
		if id == "" {
			// Its call is found by name (openCalls.updates).
			opts = append(opts, acpsdk.WithUpdateTitle(name))
		}
		return acpsdk.UpdateToolCall(acpsdk.ToolCallId(id), opts...), true
	case "plan":
		b, _ := json.Marshal(map[string]any{"sessionUpdate": e2a.UpdatePlan, "entries": obj["entries"]})
		if u, err := decodeUpdate(b); err == nil {
			return u, true
		}
	}
	return acpsdk.SessionUpdate{}, false
}

// responseFailed reports whether a function_response's response (an
// object, or the JSON string of one, as the trpc spec writes it) says the
// tool failed: a non-empty "error" member (ADK's and the workflow
// engine's convention) or "isError": true (an MCP CallToolResult).
func responseFailed(resp any) bool {
	if s, ok := resp.(string); ok {
		var v any
		if json.Unmarshal([]byte(s), &v) != nil {
			return false
		}
		resp = v
	}
	m, ok := a2amap.AsMap(resp)
	if !ok {
		return false
	}
	if m["isError"] == true {
		return true
	}
	switch e := m["error"].(type) {
	case nil:
		return false
	case string:
		return e != ""
	case bool:
		return e
	}
	return true
}

// textContent sets a tool_call_update's content to text, one text block
// (ACP's ToolCallContent, what an editor's tool card shows).
func textContent(text string) acpsdk.ToolCallUpdateOpt {
	return acpsdk.WithUpdateContent([]acpsdk.ToolCallContent{acpsdk.ToolContent(acpsdk.TextBlock(text))})
}

// MaxToolContent bounds the text of a tool call's content (toolOutputText)
// in bytes: the renderer's scratch bound (render.MaxScratch), so that a
// tool's output shown in an editor's card never makes its notification
// one the renderer does not keep a buffer for twice over; the whole output
// is the update's rawOutput.
const MaxToolContent = render.MaxScratch

// toolOutputText is the text of a function_response's response (resp) as
// an editor reads it in the tool call's card (its content): for a failed
// call the error's text (its "error" member: a string as is, an object's
// message, else the object as indented JSON), else the output: an MCP
// CallToolResult's text blocks (isError or not), a string as is (a JSON
// object or array in a string, as rawJSON reads it, as that value), any
// other value as indented JSON; "" for none. A text over MaxToolContent is
// cut at a character's boundary, with a note of what was left out.
func toolOutputText(resp any, failed bool) string {
	if raw, ok := rawJSON(resp).(json.RawMessage); ok {
		var v any
		if json.Unmarshal(raw, &v) == nil {
			resp = v
		}
	}
	text := ""
	m, _ := resp.(map[string]any)
	switch e := m["error"]; {
	case failed && e != nil && e != false && e != "":
		text = errorText(e)
	case m != nil && mcpText(m["content"]) != "":
		text = mcpText(m["content"])
	default:
		text = valueText(resp)
	}
	return boundText(text)
}

// errorText is the text of a tool response's error member e.
func errorText(e any) string {
	if m, ok := e.(map[string]any); ok {
		if msg, ok := m["message"].(string); ok && msg != "" {
			return msg
		}
	}
	return valueText(e)
}

// mcpText joins the text blocks of content, an MCP CallToolResult's
// content ([{type: text, text}, …]); "" when it has none.
func mcpText(content any) string {
	blocks, _ := content.([]any)
	var texts []string
	for _, b := range blocks {
		if m, ok := b.(map[string]any); ok && m["type"] == "text" {
			if t, ok := m["text"].(string); ok && t != "" {
				texts = append(texts, t)
			}
		}
	}
	return strings.Join(texts, "\n")
}

// valueText is v as text: a string as is, nothing for nil, any other
// value as indented JSON.
func valueText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// boundText cuts text to MaxToolContent bytes at a character's boundary,
// noting how much was left out and where the whole is.
func boundText(text string) string {
	if len(text) <= MaxToolContent {
		return text
	}
	cut := MaxToolContent
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + fmt.Sprintf("\n… (%d more bytes: the whole output is the tool call's rawOutput)", len(text)-cut)
}

// callID is the toolCallId of the i-th update of frame r when the agent
// gave its tool call none: ACP requires one, unique in the session, and
// the same each time the frame is rendered (a resume, session/load).
func callID(r *e2a.Response, i int) acpsdk.ToolCallId {
	return acpsdk.ToolCallId(fmt.Sprintf("%s/%d/%d", r.RequestID, r.Sequence, i))
}

// nameCalls gives each tool call of frame r's updates that has no id one
// (callID). A function_response without an id keeps none here (with its
// name as title): openCalls.updates finds its call.
func nameCalls(r *e2a.Response, ups []acpsdk.SessionUpdate) []acpsdk.SessionUpdate {
	for i := range ups {
		if tc := ups[i].ToolCall; tc != nil && tc.ToolCallId == "" {
			tc.ToolCallId = callID(r, i)
		}
	}
	return ups
}

// openCalls follows the tool calls of one turn that have not ended (a
// tool_call not yet given a completed or failed status), in the order
// they started, so that the turn's end can end them: ACP has no way to
// leave a tool call running after its turn, and a client shows one
// left pending or in_progress as running for ever. A call the turn ends
// without a result for was not run to completion (a model's tool call
// that nobody runs, as the OpenAI bridge passes on with finish_reason
// "tool_calls"; a failed or cancelled turn), and ACP's statuses have
// only failed for that (v1 has no cancelled status: the client marks a
// turn's calls cancelled itself when it sends session/cancel, and shows
// failed alike). The renderer and session/load share it, so a replay
// ends each call as the live turn did. It also notes the A2A artifacts
// the turn has shown (artifactUpdates), so that a Task repeating one is
// not shown twice.
type openCalls struct {
	ids    []acpsdk.ToolCallId
	titles map[acpsdk.ToolCallId]string // of the calls in ids
	shown  map[string]bool              // artifactIds of the turn's A2A artifacts shown
	// said: the turn has shown message content from a frame other than a
	// Task (text chunks, an artifact-update): a Task's artifacts then
	// repeat what was said, by ids the turn's chunks never had.
	said bool
	// lineOpen: the turn's last agent message text did not end its line.
	// An interrupt's question then starts a paragraph of its own (an ACP
	// client joins the chunks: "…first.Which city?").
	lineOpen bool
}

// updates returns the session updates of frame r (Updates), each tool
// call's result given its call's id when the agent gave it none: the
// oldest call of its name still open, or, when there is none, it is shown
// as a call of its own, already ended. Every frame of the turn passes
// here in order, so a replay names them as the live turn did.
func (o *openCalls) updates(r *e2a.Response) ([]acpsdk.SessionUpdate, error) {
	ups, err := Updates(r)
	if err == nil {
		ups = o.resultUpdate(r, o.artifactUpdates(r, ups))
		o.separateQuestion(r, ups)
	}
	for i, u := range ups {
		tu := u.ToolCallUpdate
		if tu == nil || tu.ToolCallId != "" {
			continue
		}
		name := ""
		if tu.Title != nil {
			name = *tu.Title
		}
		if j := slices.IndexFunc(o.ids, func(id acpsdk.ToolCallId) bool { return o.titles[id] == name }); j >= 0 {
			tu.ToolCallId, tu.Title = o.ids[j], nil
			continue
		}
		opts := []acpsdk.ToolCallStartOpt{acpsdk.WithStartKind(acpsdk.ToolKindOther), acpsdk.WithStartRawOutput(tu.RawOutput),
			acpsdk.WithStartContent(tu.Content)}
		if tu.Status != nil {
			opts = append(opts, acpsdk.WithStartStatus(*tu.Status))
		}
		ups[i] = acpsdk.StartToolCall(callID(r, i), name, opts...)
	}
	return ups, err
}

// separateQuestion starts the question of r, a final frame asking for
// input or auth, on a paragraph of its own when the turn's text before it
// left its line open, and notes whether ups (r's updates) leave it open.
func (o *openCalls) separateQuestion(r *e2a.Response, ups []acpsdk.SessionUpdate) {
	question := false
	if o.lineOpen && r.IsFinal {
		_, _, question = r.Interrupt()
	}
	for _, u := range ups {
		if u.AgentMessageChunk == nil || u.AgentMessageChunk.Content.Text == nil || u.AgentMessageChunk.Content.Text.Text == "" {
			continue
		}
		t := u.AgentMessageChunk.Content.Text
		if question {
			t.Text, question = "\n\n"+t.Text, false
		}
		o.noteText(t.Text)
	}
}

// noteText notes text, the turn's agent message text shown last (none
// when empty), for separateQuestion.
func (o *openCalls) noteText(text string) {
	if text != "" {
		o.lineOpen = !strings.HasSuffix(text, "\n")
	}
}

// artifactUpdates returns ups (the Updates of frame r) followed by the
// content of the artifacts of the A2A Task r carries (a final a2a.task
// frame, or a stream's task event) that the turn has not shown yet. An
// agent that answers its turn with its Task (an HTTP agent wrapping an A2A
// framework that answers message/send with a completed Task) has its
// answer there, and Updates reads only a Task's status message: the ACP
// client got an empty turn while the A2A doors showed the artifacts. An
// artifact an artifact-update event of the turn streamed is not shown
// again when the Task repeats it (by its artifactId), nor any when the
// turn has shown message content already (an agent streaming its text as
// chunks, then its Task: the chunks' text again). Tool calls among
// the parts get ids after those of ups (nameCalls).
func (o *openCalls) artifactUpdates(r *e2a.Response, ups []acpsdk.SessionUpdate) []acpsdk.SessionUpdate {
	if r.ResponseKind != e2a.KindA2AStreamEvent && r.ResponseKind != e2a.KindA2ATask {
		o.noteSaid(ups)
		return ups
	}
	ev, err := a2amap.NativeEvent(r)
	if err != nil || ev == nil {
		return ups
	}
	b, _ := json.Marshal(ev)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if o.shown == nil {
		o.shown = map[string]bool{}
	}
	if a, ok := m["artifact"].(map[string]any); ok { // an artifact-update: Updates shows it
		id, _ := a["artifactId"].(string)
		o.shown[id] = true
		return ups
	}
	if m["kind"] != "task" {
		o.noteSaid(ups)
		return ups
	}
	if o.said {
		return ups
	}
	n := len(ups)
	arts, _ := m["artifacts"].([]any)
	for _, x := range arts {
		a, _ := x.(map[string]any)
		id, _ := a["artifactId"].(string)
		if a == nil || o.shown[id] {
			continue
		}
		o.shown[id] = true
		parts, _ := a["parts"].([]any)
		for _, p := range parts {
			if u, ok := partUpdate(p); ok {
				ups = append(ups, u)
			}
		}
	}
	if len(ups) == n {
		return ups
	}
	return nameCalls(r, ups)
}

// resultUpdate returns ups (the updates of frame r) followed, when r is
// an e2a.complete ending a turn that has shown no message content, by the
// text its result stands for (a2amap.ResultText: a string result, or an
// object's content or text) as the agent's message, as the A2A doors show
// that result as the answer. An agent that answers with its result alone
// (an HTTP agent's text or JSON string, a Go handler's Complete("…"))
// gave the ACP client an empty turn.
func (o *openCalls) resultUpdate(r *e2a.Response, ups []acpsdk.SessionUpdate) []acpsdk.SessionUpdate {
	if r.ResponseKind != e2a.KindComplete || o.said {
		return ups
	}
	c, err := r.Complete()
	if err != nil {
		return ups
	}
	text, ok := a2amap.ResultText(c.Result)
	if !ok || text == "" {
		return ups
	}
	o.said = true
	return append(ups, acpsdk.UpdateAgentMessageText(text))
}

// noteSaid notes whether ups show message content (said).
func (o *openCalls) noteSaid(ups []acpsdk.SessionUpdate) {
	for _, u := range ups {
		if u.AgentMessageChunk != nil {
			o.said = true
			return
		}
	}
}

// track notes the tool call u starts or ends. A tool_call sent again
// with a final status ends its call (a client upserts tool_call by id).
func (o *openCalls) track(u acpsdk.SessionUpdate) {
	switch {
	case u.ToolCall != nil && terminal(u.ToolCall.Status):
		o.forget(u.ToolCall.ToolCallId)
	case u.ToolCall != nil:
		if !slices.Contains(o.ids, u.ToolCall.ToolCallId) {
			o.ids = append(o.ids, u.ToolCall.ToolCallId)
			if o.titles == nil {
				o.titles = map[acpsdk.ToolCallId]string{}
			}
			o.titles[u.ToolCall.ToolCallId] = u.ToolCall.Title
		}
	case u.ToolCallUpdate != nil:
		if u.ToolCallUpdate.Status != nil && terminal(*u.ToolCallUpdate.Status) {
			o.forget(u.ToolCallUpdate.ToolCallId)
		}
	}
}

// forget notes that call id has ended.
func (o *openCalls) forget(id acpsdk.ToolCallId) {
	o.ids = slices.DeleteFunc(o.ids, func(x acpsdk.ToolCallId) bool { return x == id })
	delete(o.titles, id)
}

// end returns the tool_call_update of each call still open at the end of
// a turn whose final frame is final (nil: the turn broke off with broke,
// the error its answer is): status failed, with a line of content saying
// why (endText: an editor's card was empty), the calls forgotten; or
// pending when the turn ended interrupted (the agent asks for input or
// auth, e.g. the approval of that very call: ACP's status for a call
// awaiting approval), the calls kept open for the next turn (next), whose
// response ends them, or whose end does when it never answers them: a
// call left pending by a turn whose next turn ended without its result
// stayed pending for ever (an editor's spinner).
func (o *openCalls) end(final *e2a.Response, broke error) []acpsdk.SessionUpdate {
	if len(o.ids) == 0 {
		return nil
	}
	_, _, interrupted := final.Interrupt()
	opts := []acpsdk.ToolCallUpdateOpt{acpsdk.WithUpdateStatus(acpsdk.ToolCallStatusPending)}
	if !interrupted {
		opts = []acpsdk.ToolCallUpdateOpt{acpsdk.WithUpdateStatus(acpsdk.ToolCallStatusFailed),
			textContent(endText(final, broke))}
	}
	out := make([]acpsdk.SessionUpdate, 0, len(o.ids))
	for _, id := range o.ids {
		out = append(out, acpsdk.UpdateToolCall(id, opts...))
	}
	if !interrupted {
		o.ids, o.titles = nil, nil
	}
	return out
}

// endText is the content of a tool call its turn ended without a result
// for (end): why, as the turn's answer tells it (Final of its final
// frame; broke's code when it has none): cancelled, failed (an error
// answer), or ended (with the stopReason when it is not end_turn).
func endText(final *e2a.Response, broke error) string {
	const (
		cancelled = "cancelled: the turn was cancelled before the tool answered"
		failed    = "no result: the turn failed before the tool answered"
	)
	if final == nil {
		if _, code := egress.Classify(broke); code == egress.CodeCancelled {
			return cancelled
		}
		return failed
	}
	res := Final(final, nil)
	var stop acpsdk.StopReason
	switch r := res.Result.(type) {
	case acpsdk.PromptResponse:
		stop = r.StopReason
	case map[string]any: // an ACP prompt result frame's (E2AResponseToACPJSONRPCResponse)
		stop, _ = r["stopReason"].(acpsdk.StopReason)
	}
	switch {
	case res.Error != nil:
		return failed
	case stop == acpsdk.StopReasonCancelled:
		return cancelled
	case stop == acpsdk.StopReasonEndTurn || stop == "":
		return "no result: the turn ended before the tool answered"
	}
	return "no result: the turn ended (" + string(stop) + ") before the tool answered"
}

// next returns the tracker of the turn after o's: the calls o's turn left
// open (pending: end), none of its shown content.
func (o *openCalls) next() openCalls {
	return openCalls{ids: slices.Clone(o.ids), titles: maps.Clone(o.titles)}
}

// terminal reports whether a tool call of status s has ended.
func terminal(s acpsdk.ToolCallStatus) bool {
	return s == acpsdk.ToolCallStatusCompleted || s == acpsdk.ToolCallStatusFailed
}

// errUnknownUpdate: a session update of a kind the SDK does not know.
var errUnknownUpdate = errors.New("not a kind of ACP session update")

// decodeUpdate reads an ACP session update from its JSON. The SDK
// reads some objects it cannot write back (no variant: {}; a content
// block without its type), so the update must also encode: renderers
// write it, and one that fails there would end the answer with an
// internal error. An update whose sessionUpdate names a kind the SDK does
// not know (a newer ACP's, a misspelling) is errUnknownUpdate: the SDK
// reads it as the first kind whose members it has, and it was written so
// ({"sessionUpdate":"agent_note","content":…} as a user_message_chunk:
// the agent's text shown as the user's).
func decodeUpdate(b []byte) (acpsdk.SessionUpdate, error) {
	var u acpsdk.SessionUpdate
	if err := json.Unmarshal(b, &u); err != nil {
		return acpsdk.SessionUpdate{}, err
	}
	schemaEnums(&u)
	out, err := json.Marshal(u)
	if err != nil {
		return acpsdk.SessionUpdate{}, err
	}
	var named struct {
		Kind any `json:"sessionUpdate"`
	}
	var written struct {
		Kind string `json:"sessionUpdate"`
	}
	_ = json.Unmarshal(b, &named)
	_ = json.Unmarshal(out, &written)
	if k, ok := named.Kind.(string); !ok || k != written.Kind {
		return acpsdk.SessionUpdate{}, fmt.Errorf("%w: %v", errUnknownUpdate, named.Kind)
	}
	return u, nil
}

// schemaEnums gives the enum members of u a value ACP's schema has: the
// SDK reads any string into them, and a client checking the schema (Zed)
// refused the whole notification for an agent's kind "shell". A tool
// call's kind becomes other (the schema's default); its status, optional,
// is left out (a tool_call's is then pending, a tool_call_update's
// unchanged; the turn's end ends a call left open); a plan entry's
// priority and status, required, become medium and pending, and a plan
// without entries has none (entries is a required array: it was null).
func schemaEnums(u *acpsdk.SessionUpdate) {
	switch {
	case u.ToolCall != nil:
		if u.ToolCall.Kind != "" && !slices.Contains(toolKinds, u.ToolCall.Kind) {
			u.ToolCall.Kind = acpsdk.ToolKindOther
		}
		if u.ToolCall.Status != "" && !slices.Contains(toolStatuses, u.ToolCall.Status) {
			u.ToolCall.Status = ""
		}
	case u.ToolCallUpdate != nil:
		if k := u.ToolCallUpdate.Kind; k != nil && !slices.Contains(toolKinds, *k) {
			*k = acpsdk.ToolKindOther
		}
		if st := u.ToolCallUpdate.Status; st != nil && !slices.Contains(toolStatuses, *st) {
			u.ToolCallUpdate.Status = nil
		}
	case u.Plan != nil:
		if u.Plan.Entries == nil {
			u.Plan.Entries = []acpsdk.PlanEntry{}
		}
		for i := range u.Plan.Entries {
			e := &u.Plan.Entries[i]
			switch e.Priority {
			case acpsdk.PlanEntryPriorityHigh, acpsdk.PlanEntryPriorityMedium, acpsdk.PlanEntryPriorityLow:
			default:
				e.Priority = acpsdk.PlanEntryPriorityMedium
			}
			switch e.Status {
			case acpsdk.PlanEntryStatusPending, acpsdk.PlanEntryStatusInProgress, acpsdk.PlanEntryStatusCompleted:
			default:
				e.Status = acpsdk.PlanEntryStatusPending
			}
		}
	}
}

// toolKinds and toolStatuses are the values of ACP's ToolKind and
// ToolCallStatus.
var (
	toolKinds = []acpsdk.ToolKind{acpsdk.ToolKindRead, acpsdk.ToolKindEdit, acpsdk.ToolKindDelete, acpsdk.ToolKindMove,
		acpsdk.ToolKindSearch, acpsdk.ToolKindExecute, acpsdk.ToolKindThink, acpsdk.ToolKindFetch, acpsdk.ToolKindSwitchMode,
		acpsdk.ToolKindOther}
	toolStatuses = []acpsdk.ToolCallStatus{acpsdk.ToolCallStatusPending, acpsdk.ToolCallStatusInProgress,
		acpsdk.ToolCallStatusCompleted, acpsdk.ToolCallStatusFailed}
)

// eventParts returns the content parts an A2A event carries.
func eventParts(ev any) []any {
	var out []any
	add := func(ps []any) { out = append(out, ps...) }
	b, _ := json.Marshal(ev)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if a, ok := m["artifact"].(map[string]any); ok {
		if ps, ok := a["parts"].([]any); ok {
			add(ps)
		}
	}
	if ps, ok := m["parts"].([]any); ok {
		add(ps)
	}
	if st, ok := m["status"].(map[string]any); ok {
		if msg, ok := st["message"].(map[string]any); ok {
			if ps, ok := msg["parts"].([]any); ok {
				add(ps)
			}
		}
	}
	return out
}

// rawJSON is a tool call's arguments as its ACP rawInput, or a tool's
// response as its rawOutput: a value given as a JSON object or array in a
// string (a model's function call, the trpc spec's args and response) is
// that object, which an ACP client shows as the call's parameters or
// result (the string was shown as one quoted, escaped line); any other
// value is itself.
func rawJSON(v any) any {
	s, ok := v.(string)
	if !ok {
		return v
	}
	if t := strings.TrimSpace(s); t != "" && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	return v
}

// partUpdate maps an A2A part (as JSON) to an ACP session update: text
// to a message or thought chunk, tool data parts to tool calls, other data
// and file parts to content blocks (parts.go).
func partUpdate(p any) (acpsdk.SessionUpdate, bool) {
	m, ok := p.(map[string]any)
	if !ok {
		return acpsdk.SessionUpdate{}, false
	}
	meta, _ := m["metadata"].(map[string]any)
	switch m["kind"] {
	case "text":
		text, _ := m["text"].(string)
		if meta[a2amap.MetaThought] == true {
			return acpsdk.UpdateAgentThoughtText(text), true
		}
		return acpsdk.UpdateAgentMessageText(text), true
	case "data":
		data, _ := m["data"].(map[string]any)
		typ, _ := meta[a2amap.MetaPartType].(string)
		d := map[string]any{"type": typ}
		for k, v := range data {
			if k != "type" {
				d[k] = v
			}
		}
		if u, ok := chunkUpdate(e2a.ChunkBody{DeltaKind: e2a.DeltaTool, Delta: d}); ok {
			return u, true
		}
		// Plain data: an embedded JSON resource (parts.go).
		return dataUpdate(m["data"], typ)
	case "file":
		f, _ := m["file"].(map[string]any)
		return fileUpdate(f)
	}
	return acpsdk.SessionUpdate{}, false
}

// Final returns the JSON-RPC response ending a turn: the spec mapping
// of E2AResponseToACPJSONRPCResponse, extended for the pipeline's own
// final frames: e2a.complete → {stopReason: end_turn} (or the result's
// stopReason, or what its finish_reason says: resultStopReason), e2a.error cancelled / refusal / max_tokens /
// max_turn_requests → that stopReason. id is the session/prompt's
// JSON-RPC id (the frame's jsonrpc_id when empty).
func Final(r *e2a.Response, id json.RawMessage) jsonrpc.Response {
	if len(id) == 0 {
		id = r.JSONRPCID
	}
	switch r.ResponseKind {
	case e2a.KindComplete:
		c, _ := r.Complete()
		res := acpsdk.PromptResponse{StopReason: acpsdk.StopReasonEndTurn}
		if m, ok := c.Result.(map[string]any); ok {
			res.StopReason = resultStopReason(m)
		}
		return jsonrpc.ResultResponse(id, res)
	case e2a.KindError:
		b, _ := r.Error()
		switch b.Code {
		case e2a.ErrCodeCancelled:
			return jsonrpc.ResultResponse(id, acpsdk.PromptResponse{StopReason: acpsdk.StopReasonCancelled})
		case e2a.StopRefusal, e2a.StopMaxTokens, e2a.StopMaxTurnRequests:
			return jsonrpc.ResultResponse(id, acpsdk.PromptResponse{StopReason: acpsdk.StopReason(b.Code)})
		}
	case e2a.KindA2AStreamEvent, e2a.KindA2ATask, e2a.KindA2AMessage:
		// The agent's own final A2A status or Task: failed is the
		// prompt's error, rejected a refusal, canceled cancelled, as the
		// A2A doors end the task (they were all end_turn).
		switch o := a2amap.FinalOutcome(r); o.State {
		case a2a.TaskStateFailed:
			msg := cmp.Or(o.Message, "the agent's task failed")
			return jsonrpc.ErrorResponse(id, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg,
				Data: map[string]any{"code": cmp.Or(o.Code, e2a.ErrCodeHandlerError), "retryable": false}})
		case a2a.TaskStateRejected:
			return jsonrpc.ResultResponse(id, acpsdk.PromptResponse{StopReason: acpsdk.StopReasonRefusal})
		case a2a.TaskStateCanceled:
			return jsonrpc.ResultResponse(id, acpsdk.PromptResponse{StopReason: acpsdk.StopReasonCancelled})
		}
	}
	if resp, ok := E2AResponseToACPJSONRPCResponse(r); ok {
		resp.ID = id
		return *resp
	}
	return jsonrpc.ResultResponse(id, acpsdk.PromptResponse{StopReason: acpsdk.StopReasonEndTurn})
}

// resultStopReason is the stopReason of an e2a.complete result: refusal
// for a model's refusal (its refusal member, as the OpenAI bridge
// records it); its own stopReason (or stop_reason); else, for a model's answer, what its
// finish_reason (OpenAI's chat completions, as the OpenAI bridge records
// it) says: length → max_tokens, content_filter → refusal (an editor
// shows a cut or filtered answer as such); else end_turn.
func resultStopReason(m map[string]any) acpsdk.StopReason {
	if s, _ := m["refusal"].(string); s != "" {
		return acpsdk.StopReasonRefusal // the model refused (OpenAI's message.refusal), though its finish_reason is stop
	}
	for _, k := range []string{"stopReason", "stop_reason", "finish_reason"} {
		if s, _ := m[k].(string); s != "" {
			return stopReasonOf(s)
		}
	}
	return acpsdk.StopReasonEndTurn
}

// stopReasonOf is the ACP StopReason (an enum of five) a model API's stop
// or finish reason stands for: ACP's own as they are; length and
// max_tokens → max_tokens; content_filter → refusal; canceled → cancelled;
// anything else (stop, stop_sequence, tool_use, tool_calls, pause_turn, a
// reason of the agent's own) → end_turn. It was passed through as it
// was, a value schema-checking clients refuse.
func stopReasonOf(s string) acpsdk.StopReason {
	switch s {
	case string(acpsdk.StopReasonEndTurn), string(acpsdk.StopReasonMaxTokens), string(acpsdk.StopReasonMaxTurnRequests),
		string(acpsdk.StopReasonRefusal), string(acpsdk.StopReasonCancelled):
		return acpsdk.StopReason(s)
	case "length":
		return acpsdk.StopReasonMaxTokens
	case "content_filter":
		return acpsdk.StopReasonRefusal
	case "canceled":
		return acpsdk.StopReasonCancelled
	}
	return acpsdk.StopReasonEndTurn
}

// E2AResponseToACPJSONRPCResponse is e2a_response_to_acp_jsonrpc_response
// (spec §8, §12.6): one JSON-RPC response object from a frame's
// jsonrpc_id and an acpsdk.prompt_result (result, stop_reason written as
// stopReason) or an e2a.error / acpsdk.jsonrpc_error (error). ok is false for
// any other kind. An e2a.error becomes the error its external member
// describes when that is an ACP error, else -32603 with the E2A code,
// details and retryable in data.
func E2AResponseToACPJSONRPCResponse(r *e2a.Response) (*jsonrpc.Response, bool) {
	switch r.ResponseKind {
	case e2a.KindACPPromptRes:
		body, err := r.BodyMap()
		if err != nil {
			return nil, false
		}
		res := make(map[string]any, len(body)+1)
		for k, v := range body {
			if k != "stop_reason" {
				res[k] = v
			}
		}
		// stopReason is required and one of ACP's five (stopReasonOf, as
		// for an e2a.complete): the agent's was copied as it came, empty,
		// "length" or missing.
		reason, ok := body["stopReason"].(string)
		if !ok {
			reason, _ = body["stop_reason"].(string)
		}
		res["stopReason"] = stopReasonOf(reason)
		out := jsonrpc.ResultResponse(r.JSONRPCID, res)
		return &out, true
	case e2a.KindACPJSONRPCErr:
		body, err := r.BodyMap()
		if err != nil {
			return nil, false
		}
		out := jsonrpc.ErrorResponse(r.JSONRPCID, acpError(body, ""))
		return &out, true
	case e2a.KindError:
		b, err := r.Error()
		if err != nil {
			return nil, false
		}
		if b.External != nil && b.External["protocol"] == "acp" {
			out := jsonrpc.ErrorResponse(r.JSONRPCID, acpError(b.External, b.Message))
			return &out, true
		}
		retry := b.Retryable
		data := map[string]any{"code": b.Code, "retryable": retry}
		if len(b.Details) > 0 {
			data["details"] = b.Details
		}
		out := jsonrpc.ErrorResponse(r.JSONRPCID, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: b.Message, Data: data})
		return &out, true
	}
	return nil, false
}

// acpError is the JSON-RPC error an ACP error object describes (its code,
// message and data members): -32603 when it has no integer code, and
// message when it has no message of its own.
func acpError(m map[string]any, message string) *jsonrpc.Error {
	e := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: message, Data: m["data"]}
	if n, ok := m["code"].(json.Number); ok {
		if c, err := n.Int64(); err == nil {
			e.Code = int(c)
		}
	}
	if s, ok := m["message"].(string); ok && s != "" {
		e.Message = s
	}
	return e
}

// fastText enables the text fast path ([TextUpdate]); the differential
// test turns it off.
var fastText = true

// TextUpdate renders the session/update notification of a plain text
// chunk (agent_message_chunk) straight into its bytes, as json.Marshal
// writes the notification of the chunk's [Updates]
// (TestACPFastTextMatches), for session (the frame's session_id when
// empty, returned as used). ok is false for any other frame: the renderer
// then decodes it ([render.Frame.Decoded]).
func TextUpdate(f *render.Frame, session string) (line []byte, used string, ok bool) {
	line, used, _, ok = textUpdate(f, session)
	return line, used, ok
}

// textUpdate is TextUpdate, and the chunk's text.
func textUpdate(f *render.Frame, session string) (line []byte, used, text string, ok bool) {
	if !fastText {
		return nil, session, "", false
	}
	c, ok := render.ReadPlainText(f)
	if !ok {
		return nil, session, "", false
	}
	text = c.Text
	if session == "" {
		session = c.SessionID
	}
	b := make([]byte, 0, 160+len(text)+len(session))
	b = append(b, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":`...)
	b = jsonstr.Append(b, session)
	b = append(b, `,"update":{"content":{"text":`...)
	b = jsonstr.Append(b, text)
	b = append(b, `,"type":"text"},"sessionUpdate":"agent_message_chunk"}}}`...)
	return b, session, text, true
}
