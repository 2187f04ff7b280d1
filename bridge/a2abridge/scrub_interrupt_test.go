package a2abridge_test

import (
	"context"
	"iter"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// scopeAgent asks for other credentials, quoting the one it got (an agent
// telling which token lacks a scope): auth-required with that message.
type scopeAgent struct{}

func (scopeAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	got := "none"
	if cc, ok := a2asrv.CallContextFrom(ctx); ok {
		if v, ok := cc.ServiceParams().Get("Authorization"); ok && len(v) > 0 {
			got = v[0]
		}
	}
	return func(yield func(a2a.Event, error) bool) {
		msg := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("the token "+got+" lacks scope calendar.write"))
		_ = yield(a2a.NewSubmittedTask(ec, ec.Message), nil) &&
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateAuthRequired, msg), nil)
	}
}

func (scopeAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// TestAuthRequiredMessageScrubbed: an A2A agent's auth-required message
// (the interrupt, an a2a.stream_event final frame) quoting the bearer
// token the bridge sent reaches neither the client nor E2A_RESPONSES: the
// Handler scrubs interrupts and every final frame, not only e2a.error
// frames and failure messages; the rest of the agent's message stays.
func TestAuthRequiredMessageScrubbed(t *testing.T) {
	t.Parallel()
	const key = "sk-auth-required-51c3"
	url, _ := startV1(t, scopeAgent{})
	p := pipetest.Start(t)
	p.Pool("agent", newHandler(t, p, "agent", url, bridge.WithCredentials(bridge.Credentials{APIKey: key})))
	a := p.Ask(t, "agent", `{"params":{"text":"book a meeting"}}`)
	f := a.Final()
	if f == nil {
		t.Fatal("no final frame")
	}
	if state, text, ok := f.Interrupt(); !ok || !strings.Contains(text, "lacks scope") || !strings.Contains(text, "[redacted]") {
		t.Fatalf("final %s %s: not the agent's auth-required, scrubbed (%s %q)", f.ResponseKind, f.Body, state, text)
	}
	if strings.Contains(string(f.Body), key) {
		t.Errorf("the client got the bridge's API key: %s", f.Body)
	}
	if n := natstest.StoredWith(t, p.JS, key, streams.ResponsesStream); n > 0 {
		t.Errorf("the bridge's API key is stored in %d messages of E2A_RESPONSES", n)
	}
}
