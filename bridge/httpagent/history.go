package httpagent

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// HistoryMember is the member of the POST body that holds the earlier
// turns of the request's conversation ([WithHistory]), beside the
// envelope's own members.
const HistoryMember = "history"

// HistoryMessage is one message of the [HistoryMember] list: a turn's user
// message, or the agent's answer to it as the pipeline stored it (the
// turn's final frame).
type HistoryMessage struct {
	// Role is "user" or "agent".
	Role string `json:"role"`
	// RequestID and TaskID name the turn (TaskID "" when it named no
	// task).
	RequestID string `json:"request_id"`
	TaskID    string `json:"task_id,omitempty"`
	// Text is the user's text (params.text, content or query, or an ACP
	// prompt's text blocks: bridge.UserText); for the agent, the question
	// of an interrupted turn, the message of a failed one, the result of
	// one that completed with a string, the text of its own final Message
	// (e2a.Response.Reply: an a2a.message frame, or agent.Reply's final
	// a2a.stream_event of branch message).
	Text string `json:"text,omitempty"`
	// State is the agent's turn's outcome, as the E2A read API names it:
	// succeeded, failed, input-required or auth-required.
	State string `json:"state,omitempty"`
	// Result is the result of the agent's final e2a.complete frame.
	Result any `json:"result,omitempty"`
	// Code is the error code of the agent's final e2a.error frame.
	Code string `json:"code,omitempty"`
}

// history reads the earlier turns of env's conversation and records env
// in it (bridge.Conversations.Update: the next turn finds this one), when
// the upstream has [WithHistory] and env belongs to a conversation a later
// request can continue; nil otherwise. The last maxTurns turns are read,
// and of their messages the newest that fit in maxHistoryBytes are kept.
// A conversation store that fails is history_unavailable, retryable:
// nothing was sent upstream yet.
func (u *Upstream) history(ctx context.Context, env *e2a.Envelope) ([]HistoryMessage, error) {
	if u.cfg.convs == nil || !bridge.InConversation(env) {
		return nil, nil
	}
	var conv bridge.Conversation
	if err := u.cfg.convs.Update(ctx, u.cfg.pool, env, func(c *bridge.Conversation) { conv = *c }); err != nil {
		return nil, bridge.HistoryError(err)
	}
	if u.cfg.maxTurns == 0 {
		return nil, nil
	}
	// The turns recorded before this one: a retried POST (or a request
	// delivered again) is the same turn, and the turns recorded since it
	// are later ones, not its history.
	var ids []string
	if i := slices.Index(conv.RequestIDs, env.RequestID); i >= 0 {
		ids = slices.Clone(conv.RequestIDs[:i])
	}
	if len(ids) > u.cfg.maxTurns {
		ids = ids[len(ids)-u.cfg.maxTurns:]
	}
	conv.RequestIDs = ids
	turns, _, err := u.cfg.convs.History(ctx, u.cfg.pool, env, conv, bridge.DefaultMaxHistoryBytes)
	if err != nil {
		return nil, bridge.HistoryError(err)
	}
	var msgs []HistoryMessage
	for _, t := range turns {
		msgs = append(msgs, turnMessages(t)...)
	}
	// The newest messages that fit.
	size, from := 2, len(msgs)
	for from > 0 {
		b, err := json.Marshal(msgs[from-1])
		if err != nil || size+len(b)+1 > maxHistoryBytes {
			break
		}
		size += len(b) + 1
		from--
	}
	return msgs[from:], nil
}

// turnMessages are the messages of one earlier turn: the user's, and the
// agent's answer when the turn has its final frame.
func turnMessages(t bridge.Turn) []HistoryMessage {
	env := t.Envelope
	var out []HistoryMessage
	if text := bridge.UserText(env); text != "" {
		out = append(out, HistoryMessage{Role: "user", RequestID: env.RequestID, TaskID: env.TaskID, Text: text})
	}
	if t.Final != nil {
		m := agentMessage(t.Final)
		m.RequestID, m.TaskID = env.RequestID, env.TaskID
		out = append(out, m)
	}
	return out
}

// agentMessage is the agent's message of a turn whose final frame is f.
func agentMessage(f *e2a.Response) HistoryMessage {
	m := HistoryMessage{Role: "agent", State: "succeeded"}
	if f.Status == e2a.StatusFailed {
		m.State = "failed"
	}
	if state, text, ok := f.Interrupt(); ok {
		m.State, m.Text = state, text
		return m
	}
	switch f.ResponseKind {
	case e2a.KindComplete:
		if c, err := f.Complete(); err == nil {
			m.Result = c.Result
			m.Text, _ = c.Result.(string)
		}
	case e2a.KindError:
		if b, err := f.Error(); err == nil {
			m.Code, m.Text = b.Code, b.Message
		}
	default:
		// The agent's own final Message: an a2a.message frame or a final
		// a2a.stream_event of branch message (agent.Reply).
		m.Text, _ = f.Reply()
	}
	return m
}

// withHistory is the POST body: the envelope's JSON object body with the
// [HistoryMember] msgs added as its last member (body alone when msgs is
// empty).
func withHistory(body []byte, msgs []HistoryMessage) ([]byte, error) {
	if len(msgs) == 0 {
		return body, nil
	}
	h, err := json.Marshal(msgs)
	if err != nil {
		return nil, err
	}
	body = bytes.TrimRight(body, " \t\r\n")
	if len(body) < 2 || body[len(body)-1] != '}' {
		return body, nil
	}
	out := make([]byte, 0, len(body)+len(h)+len(HistoryMember)+4)
	out = append(out, body[:len(body)-1]...)
	if len(bytes.TrimSpace(body[1:len(body)-1])) > 0 {
		out = append(out, ',')
	}
	out = append(out, `"`+HistoryMember+`":`...)
	out = append(out, h...)
	return append(out, '}'), nil
}
