package workflow

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/normalizer"
)

// TestExecuteRefusedEnvelopeSpeaksToTheClient: a request the envelope
// builder refuses (ErrInvalidRequest, as the ingress wraps the
// normalizer's refusal of an Idempotency-Key) is answered 400
// ValidationError with what a client reads of it: no package prefix
// ("workflow: ", "normalizer workflow: "), what was wrong kept.
func TestExecuteRefusedEnvelopeSpeaksToTheClient(t *testing.T) {
	en := newEnv(t, nil)
	body := workflowBody(lines(op("w", `{"Wait":{"duration":1}}`),
		`{"type":"beginExecution","executionId":"exec-cm","operationOrder":["w"]}`))
	for name, refusal := range map[string]error{
		"normalizer": fmt.Errorf("%w: %w", ErrInvalidRequest, &normalizer.Error{Kind: normalizer.ErrInvalidParams, Protocol: "workflow",
			Msg: `Idempotency-Key "a b" is not a request id`}),
		"plain": fmt.Errorf("%w: Idempotency-Key \"a b\" is not a request id", ErrInvalidRequest),
	} {
		call := serveAPI(t, &API{Executor: en.e, Submitter: &memSubmitter{}, Frames: &memFrames{},
			NewEnvelope: func(*http.Request, Principal, string) (*e2a.Envelope, error) { return nil, refusal }})
		status, m := call("", "POST", "/api/v1/workflows/execute", body)
		e, _ := m["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if status != http.StatusBadRequest || e["type"] != ValidationError || !strings.Contains(msg, `Idempotency-Key "a b" is not a request id`) {
			t.Errorf("%s: %d %v; want 400 %s naming the Idempotency-Key", name, status, m, ValidationError)
		}
		for _, bad := range []string{"normalizer ", "workflow:"} {
			if strings.Contains(msg, bad) {
				t.Errorf("%s: message %q has %q", name, msg, bad)
			}
		}
	}
}
