package ingress_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/workflow"
)

// TestExecutionsOfAnotherRequestNotFound: GET /api/v1/executions/{id}
// naming one of alice's E2A requests (sent without a method), by its
// task_id or its request id, is the 404 of a missing execution, as
// execute refuses that task_id as an executionId ("not a workflow
// execution"). Its frames, which echo no method, were read as an
// execution's: 200, success, one operation "lookup" with no operationId.
func TestExecutionsOfAnotherRequestNotFound(t *testing.T) {
	p := aliceAndBobWorkflows(t, workflow.New(workflow.Options{}))
	resp, b := do(t, "POST", p.url+"/v1/requests?wait=true", `{"task_id":"plain-e2a","params":{"text":"hello"}}`, "X-Api-Key", testKey)
	var sent struct {
		RequestID string `json:"request_id"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &sent) != nil || sent.RequestID == "" {
		t.Fatalf("alice's E2A request: %d %s", resp.StatusCode, b)
	}
	_, missing := do(t, "GET", p.url+"/api/v1/executions/no-such-exec", "", "Authorization", "Bearer "+testKey)
	for _, id := range []string{"plain-e2a", sent.RequestID} {
		want := strings.ReplaceAll(string(missing), "no-such-exec", id)
		if code, _, _, b := executionStatus(t, p.url, id, testKey); code != http.StatusNotFound || string(b) != want {
			t.Errorf("alice GET /api/v1/executions/%s, her E2A request: %d %s; want the 404 of a missing execution, %s", id, code, b, want)
		}
	}
}

// TestWorkflowIdempotencyKeyOfAnotherRequest: a REST execution whose
// Idempotency-Key alice gave before to a tool call (POST /a2e) is the
// 409 of a key in use, nothing run. It was answered as the duplicate of
// that call: 200, "status":"success", no results, the workflow never run.
func TestWorkflowIdempotencyKeyOfAnotherRequest(t *testing.T) {
	p := aliceAndBobWorkflows(t, workflow.New(workflow.Options{}))
	call := `{"a2e":"1.0","id":"c1","type":"tool/call/req","text":"hello"}` + "\n"
	if resp, b := do(t, "POST", p.url+"/a2e?agent=demo", call, "X-Api-Key", testKey, "Idempotency-Key", "key-of-a-call",
		"Content-Type", "application/x-ndjson"); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"tool/call/resp"`) {
		t.Fatalf("alice's tool call: %d %s", resp.StatusCode, b)
	}
	body, _ := json.Marshal(map[string]string{"workflow": `{"type":"operationUpdate","operationId":"w","operation":{"Wait":{"duration":1}}}` + "\n" +
		`{"type":"beginExecution","executionId":"exec-key","operationOrder":["w"]}`})
	resp, b := do(t, "POST", p.url+"/api/v1/workflows/execute", string(body), "Authorization", "Bearer "+testKey, "Idempotency-Key", "key-of-a-call")
	var e struct {
		Error workflow.Error `json:"error"`
	}
	if resp.StatusCode != http.StatusConflict || json.Unmarshal(b, &e) != nil || e.Error.Type != workflow.ValidationError || e.Error.Retryable {
		t.Errorf("alice's execution with her tool call's Idempotency-Key: %d %s; want 409 ValidationError, not retryable", resp.StatusCode, b)
	}
}
