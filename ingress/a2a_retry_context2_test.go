package ingress_test

import (
	"encoding/json"
	"testing"

	"github.com/e2a-pipeline/pipeline/ingress"
)

// TestA2ARetryAnswersTheTasksContextAllBindings: the README says the retry of a turn
// a task holds, the same Idempotency-Key, is answered as the duplicate it
// is. The retry of a new task's first message (no taskId, no contextId)
// was answered with the task's id but a contextId the normalizer had just
// made up for the retry, a different one at every retry and not the
// task's (GetTask named the first): a client that lost the first answer
// and went on in the context its retry named reached another conversation.
// The answer names the task's context, on A2A v1.0 (blocking and
// streamed) and v0.3.
func TestA2ARetryAnswersTheTasksContextAllBindings(t *testing.T) {
	p := startPipeline(t)
	v1, v03 := p.url+ingress.A2AV1Path+"?agent=demo", p.url+"/a2a?agent=demo"
	for _, c := range []struct{ name, url, key, body string }{
		{"v1.0 SendMessage", v1, "retry-ctx-v1",
			`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-rc1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`},
		{"v1.0 SendStreamingMessage", v1, "retry-ctx-v1s",
			`{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"m-rc2","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`},
		{"v0.3 message/send", v03, "retry-ctx-v03",
			`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m-rc3","parts":[{"kind":"text","text":"hi"}]}}}`},
	} {
		first := answeredContext(t, c.url, c.body, c.key)
		_, got := rpcAnswers(t, v1, `{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{"id":"`+c.key+`"}}`)
		stored := contextOf(t, got[0])
		if first != stored {
			t.Errorf("%s: the first answer names context %q, GetTask %q", c.name, first, stored)
		}
		for i := range 2 {
			if again := answeredContext(t, c.url, c.body, c.key); again != stored {
				t.Errorf("%s: retry %d (Idempotency-Key %s) answered context %q, the task's is %q", c.name, i+1, c.key, again, stored)
			}
		}
	}
}

// answeredContext posts body with the Idempotency-Key key and returns the
// contextId of its first answer (the result, or a stream's first event).
func answeredContext(t *testing.T, url, body, key string) string {
	t.Helper()
	code, answers := rpcAnswers(t, url, body, "Idempotency-Key", key)
	if code != 200 || len(answers) == 0 {
		t.Fatalf("%s: %d, %d answers", body, code, len(answers))
	}
	return contextOf(t, answers[0])
}

// contextOf is the contextId of a JSON-RPC answer's result: a Task or a
// Message (v0.3: the result itself; v1.0: under task or message), or the
// event that wraps one.
func contextOf(t *testing.T, b []byte) string {
	t.Helper()
	type ctx struct {
		ContextID string `json:"contextId"`
	}
	var r struct {
		Result struct {
			ctx
			Task    *ctx `json:"task"`
			Message *ctx `json:"message"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%v: %.300s", err, b)
	}
	switch {
	case r.Result.Task != nil:
		return r.Result.Task.ContextID
	case r.Result.Message != nil:
		return r.Result.Message.ContextID
	case r.Result.ContextID != "":
		return r.Result.ContextID
	}
	t.Fatalf("no contextId in %.300s", b)
	return ""
}
