package ingress_test

import (
	"net/http"
	"testing"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// TestTurnIdempotencyKeyOfAnotherSession: a session/prompt whose
// Idempotency-Key names a prompt of another of the caller's sessions is
// the conflict of an id in use (-32602, conflict), and so is an E2A turn
// (a session_id, a task_id) sending that request_id, and an A2A message
// starting a task under it: nothing is appended to the session or task
// they name, nothing published. The prompt was
// answered as that other prompt's duplicate, its answer streamed as this
// session's, and the request appended to this session, whose session/load
// replayed the other session's turn as its own.
func TestTurnIdempotencyKeyOfAnotherSession(t *testing.T) {
	p := startPipeline(t)
	s1, s2 := acpNewSession(t, p.url, ""), acpNewSession(t, p.url, "")
	prompt := func(sid, text string) []rpcMsg {
		t.Helper()
		resp := testkit.Open(t, http.MethodPost, p.url+"/acp", promptBody("7", sid, text, false), "Idempotency-Key", "turn-key-1")
		return ndjsonMsgs(t, resp.Body)
	}
	checkTurn(t, prompt(s1, "first"), s1, "7", "first", "end_turn")
	before := streamMsgs(t, p.js, "E2A_REQUESTS")
	if msgs := prompt(s2, "second"); len(msgs) != 1 || msgs[0].Error == nil || msgs[0].Error.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("a prompt of session 2 with the Idempotency-Key of session 1's prompt: %+v, want -32602 (the id in use) alone", msgs)
	}
	for name, body := range map[string]string{
		"session_id": `{"request_id":"turn-key-1","session_id":"` + s2 + `","method":"session/prompt","params":{"text":"third"}}`,
		"task_id":    `{"request_id":"turn-key-1","task_id":"task-of-key","params":{"text":"fourth"}}`,
	} {
		if resp, b := do(t, http.MethodPost, p.url+"/v1/requests", body, "Content-Type", "application/json"); resp.StatusCode != http.StatusConflict {
			t.Errorf("an E2A turn (%s) sending the request_id of session 1's prompt: %d %s, want 409", name, resp.StatusCode, b)
		}
	}
	a2a := `{"jsonrpc":"2.0","id":9,"method":"message/send","params":{"message":{"role":"user","messageId":"m-key","parts":[{"kind":"text","text":"fifth"}]}}}`
	if resp, b := do(t, http.MethodPost, p.url+"/a2a", a2a, "Idempotency-Key", "turn-key-1"); resp.StatusCode != http.StatusOK ||
		decodeMsg(t, b).Error == nil || decodeMsg(t, b).Error.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("an A2A message starting a task (named by its request) with the Idempotency-Key of session 1's prompt: %d %s, want -32602", resp.StatusCode, b)
	}
	if n := streamMsgs(t, p.js, "E2A_REQUESTS") - before; n != 0 {
		t.Errorf("the refused turns published %d requests", n)
	}
	if rec := record(t, p.js, ingress.KindSession, s2); len(rec.RequestIDs) != 0 {
		t.Errorf("session 2's turns: %v, want none", rec.RequestIDs)
	}
	load := ndjsonMsgs(t, acpPost(t, p.url, "", `{"jsonrpc":"2.0","id":8,"method":"session/load","params":{"sessionId":"`+s2+`","cwd":"/w","mcpServers":[]}}`).Body)
	if len(load) != 1 || load[0].Error != nil {
		t.Errorf("session 2's load: %+v, want its result alone (no turn)", load)
	}
	// The retry of session 1's prompt stays its duplicate.
	checkTurn(t, prompt(s1, "first"), s1, "7", "first", "end_turn")
}
