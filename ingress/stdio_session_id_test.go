package ingress_test

import (
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestStdioCancelOfOtherSessionSessionIDForm: over stdio, a prompt of
// session A and a session/cancel of session B, both naming their session
// as session_id (the spelling the normalizer takes beside ACP's
// sessionId): the cancel of B leaves A's prompt running, which ends
// end_turn. The connection read only sessionId to know which session a
// line is of, so both were of session "", and the cancel of B cancelled
// A's prompt in the pipeline (stopReason "cancelled").
func TestStdioCancelOfOtherSessionSessionIDForm(t *testing.T) {
	h := newCancelBeforePrompt(t)
	in, r, a, _ := h.start(t)
	send(t, in, `{"jsonrpc":"2.0","id":"s2","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`+"\n")
	b, _ := r.next()["result"].(map[string]any)["sessionId"].(string)
	if b == "" {
		t.Fatal("no second session")
	}
	send(t, in, `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"session_id":"`+a+
		`","prompt":[{"type":"text","text":"mine"}],"hold":true}}`+"\n")
	id := h.request(t)
	send(t, in, `{"jsonrpc":"2.0","method":"session/cancel","params":{"session_id":"`+b+`"}}`+"\n")
	testkit.Receive(t, h.held, 15*time.Second, "the session/cancel was not handled")
	close(h.release)
	h.notCancelled(t, id)
	if stops := reviewStops(r, 1); stops["1"] != "end_turn" {
		t.Fatalf("the prompt of session A after a session/cancel of session B: %v, want end_turn", stops)
	}
}
