package openai

import (
	"context"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// message is one chat message sent upstream. Content is a string, or a
// user message's []contentPart when it carries images or audio
// (userContent).
type message struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

// messages is the conversation sent for env: the system prompt, the
// earlier turns of env's conversation (user content and the model's reply,
// as the pipeline stored them), then env's own text, images and audio.
func (u *Upstream) messages(ctx context.Context, env *e2a.Envelope) ([]message, error) {
	content, err := userContent(env)
	if err != nil {
		return nil, err
	}
	if content == nil {
		return nil, agent.Errorf(e2a.ErrCodeInvalidRequest, false, "the request holds no text, image or audio for the model")
	}
	var msgs []message
	if s := u.system; s != "" {
		msgs = append(msgs, message{"system", s})
	} else if s := env.ParamString("system"); s != "" {
		msgs = append(msgs, message{"system", s})
	}
	past, err := u.history(ctx, env)
	if err != nil {
		return nil, err
	}
	msgs = append(msgs, past...)
	return append(msgs, message{"user", content}), nil
}

// history is the user and assistant messages of env's earlier turns, at
// most maxTurns of them, oldest first, each user message with the images
// and audio it carried (userContent; a turn whose media cannot be sent
// was answered, before the bridge sent media, from its text, which is sent
// again). A turn without a text reply (it failed, was
// interrupted, ended in tool calls, or its frames expired) is left out
// whole, so the messages alternate.
func (u *Upstream) history(ctx context.Context, env *e2a.Envelope) ([]message, error) {
	if u.convs == nil || u.maxTurns == 0 || !bridge.InConversation(env) {
		return nil, nil
	}
	conv, found, err := u.convs.Get(ctx, u.pool, env)
	if err != nil || !found {
		return nil, bridge.HistoryError(err)
	}
	turns, err := u.convs.History(ctx, u.pool, env, conv)
	if err != nil {
		return nil, bridge.HistoryError(err)
	}
	var out []message
	for _, t := range turns {
		user, err := userContent(t.Envelope)
		if err != nil {
			user = nil
			if s := UserText(t.Envelope); s != "" {
				user = s // as the model got it: answered before media were sent
			}
		}
		reply := replyText(t.Final)
		if user == nil || reply == "" {
			continue
		}
		out = append(out, message{"user", user}, message{"assistant", reply})
	}
	if n := 2 * u.maxTurns; len(out) > n {
		out = out[len(out)-n:]
	}
	return out, nil
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
