package normalizer_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestE2ATaskIDOutsideGrammarRefused: a raw E2A envelope's task_id is a
// key of the task index (protocols/e2a/turns.go admitTurn: "A task_id makes
// the request a turn of that task … A task id not known yet is a new task
// of the caller's"), read and appended under ingress taskKey, which refuses
// ids outside subjects.ValidateRequestID. The E2A front door relies on the
// normalizer to refuse such ids as invalid_request_id (400); FromE2A
// accepted them, so the append failed later as task-index backpressure and
// the client was told 503 "retry later" (retryable) for a request that can
// never succeed.
func TestE2ATaskIDOutsideGrammarRefused(t *testing.T) {
	n := normalizer.New(normalizer.Config{})
	for name, lit := range map[string]string{
		"newline":   `"task\n1"`,
		"nul":       `"task\u00001"`,
		"too long":  `"` + strings.Repeat("t", subjects.MaxIDLength+1) + `"`,
		"trailing ": `"task "`,
	} {
		body := `{"request_id":"r-1","method":"chat.send","task_id":` + lit + `,"params":{"text":"hi"}}`
		res, err := n.FromE2A(normalizer.Input{Body: []byte(body)})
		if err == nil {
			t.Errorf("%s: task_id %s accepted (envelope task_id %q); want ErrInvalidParams wrapping subjects.ErrInvalidID, as for A2A/AgentVault task ids",
				name, lit[:min(len(lit), 20)], res.Envelope.TaskID[:min(len(res.Envelope.TaskID), 20)])
			continue
		}
		if !errors.Is(err, subjects.ErrInvalidID) || normalizer.HTTPStatus(err) != 400 {
			t.Errorf("%s: err = %v (HTTP %d), want a refused id (400)", name, err, normalizer.HTTPStatus(err))
		}
	}
}

// TestLoneSurrogateIDsRefused: checkUTF8 refuses invalid UTF-8 because
// encoding/json "would silently replace the bad bytes by U+FFFD, so two
// different ids … would become one string". An escaped lone surrogate
// (what JavaScript's JSON.stringify writes for a string cut inside a
// surrogate pair) was replaced the same way: two different request_ids on
// the wire became the same envelope request_id, so the second request was
// taken for a retry (or another principal's conflict) of the first. The
// id grammar refuses U+FFFD now. The
// same holds for A2A contextId/taskId, ACP sessionId and Idempotency-Keys
// in bodies.
func TestLoneSurrogateIDsRefused(t *testing.T) {
	n := normalizer.New(normalizer.Config{})
	for _, lit := range []string{`"req-\ud800"`, `"req-\udc00"`} {
		_, err := n.FromE2A(normalizer.Input{Body: []byte(`{"request_id":` + lit + `,"params":{"text":"hi"}}`)})
		if !errors.Is(err, subjects.ErrInvalidID) {
			t.Errorf("E2A request_id %s: %v, want refused (ErrInvalidID)", lit, err)
		}
	}
	for _, lit := range []string{`"ctx-\ud800"`, `"ctx-\udbff"`} {
		_, err := n.FromA2A(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m1","contextId":` + lit + `,"parts":[{"kind":"text","text":"hi"}]}}}`)})
		if !errors.Is(err, subjects.ErrInvalidID) {
			t.Errorf("A2A contextId %s: %v, want refused (ErrInvalidID)", lit, err)
		}
	}
	// Text is not an id: a lone surrogate there is read as U+FFFD, as
	// before.
	if _, err := n.FromE2A(normalizer.Input{Body: []byte(`{"request_id":"req-text","params":{"text":"cut \ud83d"}}`)}); err != nil {
		t.Errorf("a lone surrogate in text: %v", err)
	}
}
