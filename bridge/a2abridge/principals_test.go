package a2abridge_test

import (
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

const (
	aliceKey = "ak_bridge_alice_0123456789"
	bobKey   = "ak_bridge_bob_00123456789"
)

// TestOtherPrincipalsContext: bob naming alice's context id (as a
// new task of that context) never reaches alice's upstream context: he is
// refused, or the agent gets his message in a context of its own.
func TestOtherPrincipalsContext(t *testing.T) {
	t.Parallel()
	srv := up.Start(t, up.Options{Binding: up.JSONRPC})
	auth := pipetest.KeyAuth(t, map[string]string{"alice": aliceKey, "bob": bobKey}, nil)
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(auth)))
	bridgePool(t, p, "agent", srv.BaseURL())
	c := v1Client(t, p, "agent")
	task := up.Asked(t, up.WithAPIKey(testCtx(t), aliceKey), c, &a2a.SendMessageRequest{Message: userMessage("ask: alice")})
	aliceCtx := contextOfTurn(srv, "ask: alice")
	for _, m := range []*a2a.Message{userMessage("echo bob new task"), userMessage("echo bob same task")} {
		m.ContextID = task.ContextID
		if strings.HasSuffix(up.TextOf(m.Parts), "same task") {
			m.TaskID = task.ID
		}
		_, err := c.SendMessage(up.WithAPIKey(testCtx(t), bobKey), &a2a.SendMessageRequest{Message: m})
		got := contextOfTurn(srv, up.TextOf(m.Parts))
		if err == nil && (aliceCtx == "" || got == aliceCtx) {
			t.Errorf("bob's %q reached alice's upstream context %q", up.TextOf(m.Parts), aliceCtx)
		}
		t.Logf("bob %q: err %v, upstream context %q (alice's %q)", up.TextOf(m.Parts), err, got, aliceCtx)
	}
}

// contextOfTurn is the upstream context of srv's turn that received text.
func contextOfTurn(srv *up.Server, text string) string {
	for _, e := range srv.Executions() {
		if e.Message != nil && up.TextOf(e.Message.Parts) == text {
			return e.ContextID
		}
	}
	return ""
}
