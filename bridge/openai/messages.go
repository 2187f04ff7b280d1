package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// message is one chat message sent upstream. Content is a string, or a
// user message's []contentPart when it carries images or audio
// (userContent), or nil for an assistant message of tool calls only.
// ToolCalls are an assistant message's; ToolCallID, a tool message's
// (the call its content answers).
type message struct {
	Role       string      `json:"role"`
	Content    any         `json:"content"`
	ToolCalls  []callParam `json:"tool_calls,omitempty"`
	ToolCallID string      `json:"tool_call_id,omitempty"`
}

// callParam is a tool call of an assistant message, as the model made it
// (openai-go's ChatCompletionMessageFunctionToolCallParam).
type callParam struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// messages is the conversation sent for env: the system prompt, the
// earlier turns of env's conversation (user content and the model's reply,
// as the pipeline stored them), then env's tool results (answering the
// calls of the conversation's last turn) and its own text, images and
// audio.
func (u *Upstream) messages(ctx context.Context, env *e2a.Envelope) ([]message, error) {
	results, err := toolResults(env)
	if err != nil {
		return nil, agent.Errorf(e2a.ErrCodeInvalidRequest, false, "%v", err)
	}
	content, err := userContent(env)
	if err != nil {
		return nil, err
	}
	if content == nil && len(results) == 0 {
		return nil, agent.Errorf(e2a.ErrCodeInvalidRequest, false, "the request holds no text, image, audio or tool result for the model")
	}
	var msgs []message
	if s := u.system; s != "" {
		msgs = append(msgs, message{Role: "system", Content: s})
	} else if s := env.ParamString("system"); s != "" {
		msgs = append(msgs, message{Role: "system", Content: s})
	}
	past, calls, err := u.history(ctx, env, len(results) > 0)
	if err != nil {
		return nil, err
	}
	if err := answers(calls, results); err != nil {
		return nil, agent.Errorf(e2a.ErrCodeInvalidRequest, false, "%v", err)
	}
	msgs = append(append(msgs, past...), results...)
	if content != nil {
		msgs = append(msgs, message{Role: "user", Content: content})
	}
	return msgs, nil
}

// toolResults is the tool messages of env's tool results, in order: its
// params.data_parts holding a function_response (an A2A DataPart of part
// metadata type function_response, as the normalizer keeps it; an E2A
// client writes the same, or data of type function_response as a tool
// delta has it), each {id, name, response}: id the call answered,
// response sent as it is when a string, else as its JSON.
func toolResults(env *e2a.Envelope) ([]message, error) {
	parts, _ := env.Params["data_parts"].([]any)
	var out []message
	for i, p := range parts {
		m, _ := p.(map[string]any)
		data, _ := m["data"].(map[string]any)
		meta, _ := m["metadata"].(map[string]any)
		if str(meta, "type") != e2a.ToolFunctionResponse && str(data, "type") != e2a.ToolFunctionResponse {
			continue
		}
		id := str(data, "id")
		if id == "" {
			return nil, fmt.Errorf("data_parts[%d]: a function_response without the id of the call it answers", i)
		}
		if slices.ContainsFunc(out, func(r message) bool { return r.ToolCallID == id }) {
			return nil, fmt.Errorf("data_parts[%d]: tool call %.200q answered twice", i, id)
		}
		text, err := responseText(data["response"])
		if err != nil {
			return nil, fmt.Errorf("data_parts[%d]: the response to %.200q: %w", i, id, err)
		}
		out = append(out, message{Role: "tool", Content: text, ToolCallID: id})
	}
	return out, nil
}

// responseText is a tool's response as a tool message's content: a
// string as it is, nothing as "", anything else as its JSON.
func responseText(v any) (string, error) {
	switch r := v.(type) {
	case nil:
		return "", nil
	case string:
		return r, nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// answers checks that results answer calls, the tool calls of the
// conversation's last turn: each result one of them, each of them
// answered (a chat completion takes an assistant message's tool calls
// only with a tool message for each).
func answers(calls []callParam, results []message) error {
	for _, r := range results {
		if !slices.ContainsFunc(calls, func(c callParam) bool { return c.ID == r.ToolCallID }) {
			return fmt.Errorf("the tool result for call %.200q answers no tool call of the conversation's last turn", r.ToolCallID)
		}
	}
	for _, c := range calls {
		if !slices.ContainsFunc(results, func(r message) bool { return r.ToolCallID == c.ID }) {
			return fmt.Errorf("tool call %.200q (%.100s) of the conversation's last turn has no result: answer every call of a turn at once",
				c.ID, c.Function.Name)
		}
	}
	return nil
}

// unit is the messages of one earlier turn in history's output: from
// start, beginning with tool messages when answers (the results of the
// turn before's calls), its assistant message holding calls.
type unit struct {
	start   int
	answers bool
	calls   []callParam
	turn    int // its index in the turns read
}

// history is the messages of env's earlier turns, at most maxTurns of
// them, those whose stored bytes fit in maxBytes (bridge's History), oldest first: each turn's tool results (when they answer the
// calls of the turn before), its user message with the images and audio
// it carried (userContent; a turn whose media cannot be sent was
// answered, before the bridge sent media, from its text, which is sent
// again), and its reply: the text, with the tool calls it made when the
// next turn answered them (read from its stored frames). A turn without a
// text reply (it failed, was interrupted, ended in tool calls no turn
// answered, or its frames expired) is left out whole, so the messages
// alternate. A tool exchange is kept whole: past maxTurns the turns are
// cut before the turn that made the first of its calls; past maxBytes
// (which no turn may pass), after its last turn. calls are the tool calls of the
// last turn, read only when answering (env carries tool results).
func (u *Upstream) history(ctx context.Context, env *e2a.Envelope, answering bool) (out []message, calls []callParam, err error) {
	if u.convs == nil || u.maxTurns == 0 || !bridge.InConversation(env) {
		return nil, nil, nil
	}
	conv, found, err := u.convs.Get(ctx, u.pool, env)
	if err != nil || !found {
		return nil, nil, bridge.HistoryError(err)
	}
	all, cut, err := u.convs.History(ctx, u.pool, env, conv, u.maxBytes)
	if err != nil {
		return nil, nil, bridge.HistoryError(err)
	}
	if cut {
		// The oldest turns read may answer the calls of a turn past the
		// bound: that tool exchange is left out whole.
		for len(all) > 0 && hasToolResults(all[0].Envelope) {
			all = all[1:]
		}
	}
	var turns []bridge.Turn
	for _, t := range all {
		if t.Final != nil && t.Final.ResponseKind == e2a.KindComplete {
			turns = append(turns, t)
		}
	}
	var units []unit
	for i, t := range turns {
		var prev []callParam // the calls this turn's results answer
		if n := len(units); n > 0 && units[n-1].turn == i-1 {
			prev = units[n-1].calls
		}
		made, err := u.answeredCalls(ctx, turns, i, answering)
		if err != nil {
			return nil, nil, err
		}
		msgs := turnMessages(t, prev, made)
		if msgs == nil {
			continue
		}
		units = append(units, unit{start: len(out), answers: len(prev) > 0, calls: made, turn: i})
		out = append(out, msgs...)
	}
	if n := len(units); n > 0 && units[n-1].turn == len(turns)-1 {
		calls = units[n-1].calls
	}
	if first := len(units) - u.maxTurns; first > 0 {
		for first > 0 && units[first].answers {
			first--
		}
		out = out[units[first].start:]
	}
	return out, calls, nil
}

// hasToolResults reports whether env carries tool results (the answers
// to the calls of the turn before it).
func hasToolResults(env *e2a.Envelope) bool {
	r, err := toolResults(env)
	return err != nil || len(r) > 0
}

// turnMessages is the messages of turn t (see history), nil when it is
// left out: its tool results when prev are the calls they answer, its
// user message, its reply with the calls it made that the next turn
// answered (made).
func turnMessages(t bridge.Turn, prev, made []callParam) []message {
	var msgs []message
	if len(prev) > 0 {
		msgs, _ = toolResults(t.Envelope) // they answer prev: answeredCalls
	}
	user, err := userContent(t.Envelope)
	if err != nil {
		user = nil
		if s := UserText(t.Envelope); s != "" {
			user = s // as the model got it: answered before media were sent
		}
	}
	reply := replyText(t.Final)
	if msgs == nil && (user == nil || (reply == "" && len(made) == 0)) {
		return nil
	}
	if user != nil {
		msgs = append(msgs, message{Role: "user", Content: user})
	}
	var content any
	if reply != "" || len(made) == 0 {
		content = reply
	}
	return append(msgs, message{Role: "assistant", Content: content, ToolCalls: made})
}

// answeredCalls is the tool calls turns[i] made (from its stored frames)
// when the next turn answers each of them with its tool results, and with
// nothing else (answering: the last turn, whose calls env's results
// answer; messages checks them); nil otherwise.
func (u *Upstream) answeredCalls(ctx context.Context, turns []bridge.Turn, i int, answering bool) ([]callParam, error) {
	var results []message
	if i+1 < len(turns) {
		results, _ = toolResults(turns[i+1].Envelope)
	}
	last := i == len(turns)-1
	if (last && !answering) || (!last && len(results) == 0) {
		return nil, nil
	}
	made, err := u.storedCalls(ctx, turns[i].Envelope.RequestID)
	if err != nil {
		return nil, bridge.HistoryError(err)
	}
	if !last && answers(made, results) != nil {
		return nil, nil
	}
	return made, nil
}

// storedCalls is the function_call tool deltas of request id's stored
// frames, each call once, in order.
func (u *Upstream) storedCalls(ctx context.Context, id string) ([]callParam, error) {
	subj, err := subjects.Response(id)
	if err != nil {
		return nil, err
	}
	msgs, err := streams.DirectGetAll(ctx, u.convs.JetStream().Conn(), streams.ResponsesStream, subj, 1, 256)
	if errors.Is(err, streams.ErrNoMessages) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the frames of %s: %w", id, err)
	}
	var calls []callParam
	for _, m := range msgs {
		frames, err := e2a.BurstResponses(m.Header.Get(subjects.HeaderFrames), m.Data)
		if err != nil {
			return nil, fmt.Errorf("the frames of %s: %w", id, err)
		}
		for _, f := range frames {
			if c, ok := callOf(f); ok && !slices.ContainsFunc(calls, func(o callParam) bool { return o.ID == c.ID }) {
				calls = append(calls, c)
			}
		}
	}
	return calls, nil
}

// callOf is the tool call of a function_call tool delta frame.
func callOf(f *e2a.Response) (callParam, bool) {
	c, err := f.Chunk()
	if err != nil || c.DeltaKind != e2a.DeltaTool {
		return callParam{}, false
	}
	d, _ := c.Delta.(map[string]any)
	if str(d, "type") != e2a.ToolFunctionCall || str(d, "id") == "" {
		return callParam{}, false
	}
	args, ok := d["args"].(string)
	if !ok {
		args, _ = responseText(d["args"])
	}
	return callParam{ID: str(d, "id"), Type: "function", Function: functionCall{Name: str(d, "name"), Arguments: args}}, true
}

// UserText is the text of a request for the model (bridge.UserText).
func UserText(env *e2a.Envelope) string { return bridge.UserText(env) }

// replyText is the content of a turn's final e2a.complete frame ("" for
// any other final frame, or none).
func replyText(f *e2a.Response) string {
	if f == nil || f.ResponseKind != e2a.KindComplete {
		return ""
	}
	b, err := f.Complete()
	if err != nil {
		return ""
	}
	switch r := b.Result.(type) {
	case string:
		return r
	case map[string]any:
		s, _ := r["content"].(string)
		return s
	}
	return ""
}
