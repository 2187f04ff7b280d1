package a2a_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// postKeyed posts body to url with the Idempotency-Key key (and the A2A
// v1.0 version header) and returns the answer's status and body.
func postKeyed(t *testing.T, url, key, body string) (int, string) {
	t.Helper()
	resp, b := testkit.Do(t, http.MethodPost, url, body, "Content-Type", "application/json", "A2A-Version", "1.0", "Idempotency-Key", key)
	return resp.StatusCode, string(b)
}

// TestRetriedAnswerToEndedTask: the answer to an input-required task,
// sent again with the same Idempotency-Key (a client retrying) after the
// first call completed the task, is answered as the duplicate it is, the
// first call's answer, on A2A v1.0 SendMessage (JSON-RPC), message:send
// (HTTP+JSON) and v0.3 message/send, as the E2A door answers it; a new
// message to the ended task is still refused. The retry was refused as a
// message to a task in a terminal state (-32004, 400 FAILED_PRECONDITION).
func TestRetriedAnswerToEndedTask(t *testing.T) {
	g := startAnsweredAhead(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := v1Binding(t, g.Pipeline, a2a.TransportProtocolJSONRPC)
	doors := []struct {
		name, path, body string
		refused          func(code int, body string) bool
	}{
		{"SendMessage", ingress.A2AV1Path, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER",` +
			`"messageId":"%m","taskId":"%t","parts":[{"text":"%x"}]}}}`,
			func(code int, body string) bool { return strings.Contains(body, `"code":-32004`) }},
		{"message:send", ingress.A2AV1Path + "/message:send", `{"message":{"role":"ROLE_USER","messageId":"%m","taskId":"%t","parts":[{"text":"%x"}]}}`,
			func(code int, body string) bool {
				return code == http.StatusBadRequest && strings.Contains(body, "FAILED_PRECONDITION")
			}},
		{"message/send", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user",` +
			`"messageId":"%m","taskId":"%t","parts":[{"kind":"text","text":"%x"}]}}}`,
			func(code int, body string) bool { return strings.Contains(body, `"code":-32004`) }},
	}
	for _, d := range doors {
		task := up.Asked(t, ctx, c, up.Msg("ask"))
		msg := func(id, text string) string {
			return strings.NewReplacer("%m", id, "%t", string(task.ID), "%x", text).Replace(d.body)
		}
		code, first := postKeyed(t, g.URL+d.path, "answer-"+string(task.ID), msg("m-answer", "Paris"))
		if code != http.StatusOK || !strings.Contains(first, "Hello, Paris") || !strings.Contains(strings.ToLower(first), "completed") {
			t.Fatalf("%s, the answer: %d %s; want the task completed", d.name, code, first)
		}
		code, retry := postKeyed(t, g.URL+d.path, "answer-"+string(task.ID), msg("m-answer", "Paris"))
		if code != http.StatusOK || retry != first {
			t.Errorf("%s, the answer retried (same Idempotency-Key) once the task completed: %d %s\nwant the first call's answer: %s",
				d.name, code, retry, first)
		}
		if code, body := postKeyed(t, g.URL+d.path, "another-"+string(task.ID), msg("m-another", "Rome")); !d.refused(code, body) {
			t.Errorf("%s, a new message to the completed task: %d %s; want it refused (a task in a terminal state)", d.name, code, body)
		}
	}
}
