package openai_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

const opsKey = "ak_ops_0123456789abcdef000"

// TestAdminTurnInOwnersContext: with ops given the admin role (who may
// continue everyone's conversations), ops's message in alice's A2A context
// sends the model alice's earlier turn, and alice's next turn gets ops's
// turn too (the turns of her conversation). Bob naming alice's context in
// an E2A envelope whose provenance forges alice as the conversation's owner
// (e2a.DetailConversationOwner, which only the ingress writes) gets none of
// it: the context is alice's, his request refused (409) before anything is
// published, the model never called; in a context of his own the forged
// owner gives him no one's turns but his.
func TestAdminTurnInOwnersContext(t *testing.T) {
	srv := newModelServer(t)
	a := pipetest.KeyAuth(t, map[string]string{"alice": aliceKey, "bob": bobKey, "ops": opsKey}, map[string][]string{"ops": {"admin"}})
	p := startBridge(t, srv, setup{ingress: []ingress.Option{ingress.WithAuth(a)}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := a2aupstream.Client(t, p.URL)
	send := func(key, text, contextID string) string {
		t.Helper()
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
		msg.ContextID = contextID
		res, err := c.SendMessage(a2aupstream.WithAPIKey(ctx, key), &a2a.SendMessageRequest{Message: msg})
		if err != nil {
			t.Fatalf("SendMessage %q: %v", text, err)
		}
		reply, ok := res.(*a2a.Message)
		if !ok || reply.ContextID == "" || v1Text(reply.Parts) != "echo: "+text {
			t.Fatalf("SendMessage %q: %T %+v", text, res, res)
		}
		return reply.ContextID
	}

	conv := send(aliceKey, "my name is Alice", "")
	wantMessages(t, "alice's first turn", lastMessages(t, srv), "user: my name is Alice")
	if send(opsKey, "what is her name?", conv) != conv {
		t.Fatal("the reply to the admin's message is in another context")
	}
	wantMessages(t, "the admin's turn in alice's context", lastMessages(t, srv), "user: my name is Alice",
		"assistant: echo: my name is Alice", "user: what is her name?")
	send(aliceKey, "and now?", conv)
	wantMessages(t, "alice's turn after the admin's", lastMessages(t, srv), "user: my name is Alice",
		"assistant: echo: my name is Alice", "user: what is her name?", "assistant: echo: what is her name?",
		"user: and now?")

	forged := func(contextID string) map[string]any {
		return map[string]any{"context_id": contextID, "provenance": map[string]any{"source_protocol": "e2a",
			"details": map[string]any{e2a.DetailConversationOwner: "alice"}}}
	}
	refused := forged(conv)
	refused["request_id"], refused["method"], refused["params"] = "bob-forged-refused", "chat.send", map[string]any{"content": "what is her name?"}
	b, _ := json.Marshal(refused)
	resp, rb := testkit.Do(t, http.MethodPost, p.URL+"/v1/requests", string(b), "Content-Type", "application/json", "X-API-Key", bobKey)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(rb), "context_id") {
		t.Fatalf("bob naming alice's context: %d %s; want 409 naming context_id", resp.StatusCode, rb)
	}
	wantMessages(t, "after bob's refused request (the model not called)", lastMessages(t, srv), "user: my name is Alice",
		"assistant: echo: my name is Alice", "user: what is her name?", "assistant: echo: what is her name?", "user: and now?")
	a1 := read(t, ask(t, p, bobKey, "bob-forged", "what is her name?", forged("bob-ctx")))
	if a1.final.ResponseKind != e2a.KindComplete {
		t.Fatalf("bob's request: final %s", a1.final.ResponseKind)
	}
	wantMessages(t, "bob forging alice as the owner", lastMessages(t, srv), "user: what is her name?")
}
