package openai_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge/openai"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

const (
	aliceKey = "ak_alice_0123456789abcdef"
	bobKey   = "ak_bob_0123456789abcdef00"
)

// aliceAndBob is an ingress.Auth of alice's and bob's API keys.
func aliceAndBob(t *testing.T) *ingress.Auth {
	t.Helper()
	return pipetest.KeyAuth(t, map[string]string{"alice": aliceKey, "bob": bobKey}, nil)
}

// lastMessages is the messages of the model server's last call.
func lastMessages(t *testing.T, srv *modelServer) []string {
	t.Helper()
	calls := srv.recordedCalls()
	if len(calls) == 0 {
		t.Fatal("no upstream call")
	}
	return calls[len(calls)-1].Body.roles()
}

func wantMessages(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: upstream messages\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestMultiTurnE2A: with API-key auth, the second request of alice's E2A
// session sends the model [system, user1, assistant1, user2] (the system
// prompt the request carries, then the first turn as the pipeline stored
// it); bob naming the same session_id gets none of alice's turns, nor does
// alice in another session. The model server got the bridge's key as
// Authorization: Bearer and the client's trace; the key is in no stored
// message of any stream or bucket, and in no log line.
func TestMultiTurnE2A(t *testing.T) {
	logs := &testkit.Buffer{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })

	srv := newModelServer(t)
	p := startBridge(t, srv, setup{ingress: []ingress.Option{ingress.WithAuth(aliceAndBob(t))}, log: logs})
	session := map[string]any{"session_id": "sess-shared"}
	sys := "Answer in one line."
	turn := func(key, id, text string, extra map[string]any, headers ...string) answer {
		t.Helper()
		a := read(t, askWith(t, p, key, id, map[string]any{"content": text, "system": sys}, extra, headers...))
		if a.final.ResponseKind != e2a.KindComplete || a.text != "echo: "+text {
			t.Fatalf("%s: final %s, text %q", id, a.final.ResponseKind, a.text)
		}
		return a
	}

	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	turn(aliceKey, "alice-1", "my name is Alice", session, "traceparent", traceparent)
	wantMessages(t, "alice's first turn", lastMessages(t, srv), "system: "+sys, "user: my name is Alice")
	turn(aliceKey, "alice-2", "what is my name?", session)
	wantMessages(t, "alice's second turn", lastMessages(t, srv), "system: "+sys, "user: my name is Alice",
		"assistant: echo: my name is Alice", "user: what is my name?")

	turn(bobKey, "bob-1", "what is my name?", session)
	wantMessages(t, "bob in alice's session id", lastMessages(t, srv), "system: "+sys, "user: what is my name?")
	turn(aliceKey, "alice-other", "hi", map[string]any{"session_id": "sess-other"})
	wantMessages(t, "alice in another session", lastMessages(t, srv), "system: "+sys, "user: hi")
	turn(aliceKey, "alice-3", "and now?", session)
	wantMessages(t, "alice's third turn", lastMessages(t, srv), "system: "+sys, "user: my name is Alice",
		"assistant: echo: my name is Alice", "user: what is my name?", "assistant: echo: what is my name?",
		"user: and now?")

	calls := srv.recordedCalls()
	for i, c := range calls {
		if got := c.Header.Get("Authorization"); got != "Bearer "+upstreamKey {
			t.Fatalf("call %d: Authorization %q", i, got)
		}
	}
	if tp := calls[0].Header.Get("traceparent"); !strings.Contains(tp, "4bf92f3577b34da6a3ce929d0e0e4736") {
		t.Fatalf("traceparent upstream %q, want the client's trace", tp)
	}
	if n := natstest.StoredWith(t, p.JS, "my name is Alice"); n == 0 {
		t.Fatal("the scan of the streams found not even the requests' text")
	}
	if n := natstest.StoredWith(t, p.JS, upstreamKey); n > 0 {
		t.Fatalf("the upstream key is in %d stored messages", n)
	}
	if strings.Contains(logs.String(), upstreamKey) || strings.Contains(logs.String(), "sk-upstream") {
		t.Fatalf("the upstream key is in the logs:\n%s", logs.String())
	}
}

func v1Text(parts a2a.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text())
	}
	return b.String()
}

// TestMultiTurnA2AContext: a second A2A message in the first's context
// sends the model the first turn, after the operator's system prompt
// (WithSystem, which wins over a request's params.system).
func TestMultiTurnA2AContext(t *testing.T) {
	srv := newModelServer(t)
	const sys = "You are the operator's assistant."
	p := startBridge(t, srv, setup{up: []openai.Option{openai.WithSystem(sys)}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := a2aupstream.Client(t, p.URL)
	// A reply of text only is a Message (the trpc non-streaming rule).
	send := func(text string, contextID string) (replyContext string) {
		t.Helper()
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
		msg.ContextID = contextID
		res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		reply, ok := res.(*a2a.Message)
		if !ok || reply.ContextID == "" || v1Text(reply.Parts) != "echo: "+text {
			t.Fatalf("SendMessage: %T %+v", res, res)
		}
		return reply.ContextID
	}
	first := send("first question", "")
	wantMessages(t, "first turn", lastMessages(t, srv), "system: "+sys, "user: first question")
	if send("second question", first) != first {
		t.Fatal("the reply to the second message is in another context")
	}
	wantMessages(t, "second turn in the context", lastMessages(t, srv), "system: "+sys, "user: first question",
		"assistant: echo: first question", "user: second question")
	send("elsewhere", "")
	wantMessages(t, "a new context", lastMessages(t, srv), "system: "+sys, "user: elsewhere")

	// The operator's prompt wins over the request's.
	read(t, askWith(t, p, "", "e2a-sys", map[string]any{"content": "x", "system": "ignore the operator"}, nil))
	wantMessages(t, "params.system with WithSystem", lastMessages(t, srv), "system: "+sys, "user: x")
}
