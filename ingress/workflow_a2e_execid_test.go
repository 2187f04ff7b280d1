package ingress_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// a2eWorkflowLine is the POST /a2e line executing the workflow whose JSONL
// lines are wf (type a2e.workflow.execute).
func a2eWorkflowLine(t *testing.T, reqID string, wf ...string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"a2e": "1.0", "id": "m-" + reqID, "type": normalizer.MethodWorkflowExecute,
		"req_id": reqID, "workflow": strings.Join(wf, "\n")})
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// executionStatus reads GET /api/v1/executions/{id} as key: its code, its
// status and each operation's status by operationId.
func executionStatus(t *testing.T, base, id, key string) (int, string, map[string]string, []byte) {
	t.Helper()
	resp, b := do(t, "GET", base+"/api/v1/executions/"+id, "", "Authorization", "Bearer "+key)
	var st struct {
		Status     string `json:"status"`
		Operations []struct {
			OperationID string `json:"operationId"`
			Status      string `json:"status"`
		} `json:"operations"`
	}
	_ = json.Unmarshal(b, &st)
	ops := map[string]string{}
	for _, o := range st.Operations {
		ops[o.OperationID] = o.Status
	}
	return resp.StatusCode, st.Status, ops, b
}

// TestA2EWorkflowFoundByExecutionID: a workflow executed over POST /a2e is
// found by its executionId (GET /api/v1/executions/{executionId}), as one
// submitted to the REST API is: while it runs (its plan: the operations
// ended, running and pending) and once it ended. Another principal asking
// that executionId gets the 404 of a missing one. It answered 404 to its
// owner too: only its request id was found.
func TestA2EWorkflowFoundByExecutionID(t *testing.T) {
	api := testkit.NewHeld(t)
	pol := &workflow.Policy{}
	if err := pol.AllowHosts("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	exec := workflow.New(workflow.Options{Policy: pol})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithWorkflow(exec), ingress.WithWorkflowRateLimits(ingress.RateLimits{}),
		ingress.WithAuth(aliceAndBob(t))))
	p.Pool(workflow.Pool, exec)

	body := a2eWorkflowLine(t, "r-exec",
		`{"type":"operationUpdate","operationId":"first","operation":{"Wait":{"duration":1}}}`,
		`{"type":"operationUpdate","operationId":"call","operation":{"ApiCall":{"method":"GET","url":"`+api.URL+`/slow","outputPath":"/workflow/r"}}}`,
		`{"type":"operationUpdate","operationId":"last","operation":{"Wait":{"duration":1}}}`,
		`{"type":"beginExecution","executionId":"exec-a2e","operationOrder":["first","call","last"]}`)
	resp := testkit.Open(t, "POST", p.URL+"/a2e", body, "X-Api-Key", testKey, "Content-Type", "application/x-ndjson")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /a2e: %d", resp.StatusCode)
	}
	testkit.Receive(t, api.Arrived, 10*time.Second, "the workflow's ApiCall did not start")

	code, status, ops, b := executionStatus(t, p.URL, "exec-a2e", testKey)
	if code != http.StatusOK || status != workflow.StatusRunning || len(ops) != 3 || ops["first"] != workflow.StatusSuccess ||
		ops["call"] != workflow.StatusRunning || ops["last"] != workflow.StatusPending {
		t.Errorf("alice GET exec-a2e while it runs: %d %s; want 200 running, first success, call running, last pending", code, b)
	}
	_, missing := do(t, "GET", p.URL+"/api/v1/executions/no-such-exec", "", "Authorization", "Bearer "+bobKey)
	want := strings.ReplaceAll(string(missing), "no-such-exec", "exec-a2e")
	if code, _, _, b := executionStatus(t, p.URL, "exec-a2e", bobKey); code != http.StatusNotFound || string(b) != want {
		t.Errorf("bob GET exec-a2e: %d %s; want the 404 of a missing execution, %s", code, b, want)
	}

	api.Release()
	answer, err := io.ReadAll(resp.Body)
	if err != nil || !strings.Contains(string(answer), `"type":"`+normalizer.MethodWorkflowExecute+`/resp"`) {
		t.Fatalf("the /a2e answer (%v): %s", err, answer)
	}
	code, status, ops, b = executionStatus(t, p.URL, "exec-a2e", testKey)
	if code != http.StatusOK || status != workflow.StatusSuccess || len(ops) != 3 || ops["first"] != workflow.StatusSuccess ||
		ops["call"] != workflow.StatusSuccess || ops["last"] != workflow.StatusSuccess {
		t.Errorf("alice GET exec-a2e once ended: %d %s; want 200 success, three operations success", code, b)
	}
}

// TestA2EIdempotencyKeyReusedForAnotherExecutionID: over POST /a2e as over
// the REST API, a second execution with an Idempotency-Key already used is
// the duplicate of the first, whatever workflow it carries: its own
// executionId is not indexed against the first execution.
func TestA2EIdempotencyKeyReusedForAnotherExecutionID(t *testing.T) {
	exec := workflow.New(workflow.Options{})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithWorkflow(exec), ingress.WithWorkflowRateLimits(ingress.RateLimits{}),
		ingress.WithAuth(aliceAndBob(t))))
	p.Pool(workflow.Pool, exec)
	for _, execID := range []string{"idem-a", "idem-b"} {
		body := a2eWorkflowLine(t, "r-"+execID, `{"type":"operationUpdate","operationId":"wait","operation":{"Wait":{"duration":1}}}`,
			`{"type":"beginExecution","executionId":"`+execID+`","operationOrder":["wait"]}`)
		resp, b := do(t, "POST", p.URL+"/a2e", body, "X-Api-Key", testKey, "Idempotency-Key", "k-a2e-1")
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "/resp") {
			t.Fatalf("POST /a2e %s with Idempotency-Key k-a2e-1: %d %s", execID, resp.StatusCode, b)
		}
	}
	if code, _, _, b := executionStatus(t, p.URL, "idem-a", testKey); code != http.StatusOK || !strings.Contains(string(b), `"request_id":"k-a2e-1"`) {
		t.Errorf("GET idem-a: %d %s; want the execution k-a2e-1", code, b)
	}
	if code, _, _, b := executionStatus(t, p.URL, "idem-b", testKey); code != http.StatusNotFound {
		t.Errorf("GET idem-b (an executionId only the duplicate carried): %d %s; want 404", code, b)
	}
}

// TestWorkflowIndexFailurePublishesNothing: when the executionId cannot be
// indexed (the task index unavailable: here its bucket deleted), POST
// /api/v1/workflows/execute answers 503 and publishes nothing, as POST /a2e
// indexes before it publishes. It published first: the client was told to
// retry an execution already queued, which its retry (a duplicate) never
// indexed.
func TestWorkflowIndexFailurePublishesNothing(t *testing.T) {
	exec := workflow.New(workflow.Options{})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithWorkflow(exec), ingress.WithWorkflowRateLimits(ingress.RateLimits{})))
	ctx := t.Context()
	if err := p.JS.DeleteKeyValue(ctx, streams.TasksBucket); err != nil {
		t.Fatal(err)
	}
	requests := func() uint64 {
		t.Helper()
		s, err := p.JS.Stream(ctx, streams.RequestsStream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	before := requests()
	wf := `{"type":"operationUpdate","operationId":"wait","operation":{"Wait":{"duration":1}}}` + "\n" +
		`{"type":"beginExecution","executionId":"exec-unindexed","operationOrder":["wait"]}`
	body, _ := json.Marshal(map[string]string{"workflow": wf})
	resp, b := do(t, "POST", p.URL+"/api/v1/workflows/execute", string(body))
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("execute with the task index gone: %d %s; want 503", resp.StatusCode, b)
	}
	if after := requests(); after != before {
		t.Errorf("E2A_REQUESTS holds %d messages, %d before: an execution was queued that its executionId cannot find", after, before)
	}
}
