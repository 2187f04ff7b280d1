package ingress_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// TestQueuedExecutionLocationResolves: when no workflow worker picks
// an execution up in time (every worker busy or restarting), execute
// answers 202 with Location /api/v1/executions/{id}. Following that
// Location must show the caller's execution (status "running"), not 404
// "not found": the execution is durably queued and will run.
func TestQueuedExecutionLocationResolves(t *testing.T) {
	exec := workflow.New(workflow.Options{Limits: workflow.Limits{MaxExecutionTime: time.Second}})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithWorkflow(exec), ingress.WithWorkflowRateLimits(ingress.RateLimits{})))
	stop := p.Pool(workflow.Pool, exec)
	stop() // the pool's only worker is gone (restarting); its durable consumer stays
	const body = `{"workflow":"{\"type\":\"operationUpdate\",\"operationId\":\"wait\",\"operation\":{\"Wait\":{\"duration\":10}}}\n{\"type\":\"beginExecution\",\"executionId\":\"exec-q\",\"operationOrder\":[\"wait\"]}"}`
	resp, b := do(t, "POST", p.URL+"/api/v1/workflows/execute", body, "Content-Type", "application/json")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("execute with no worker: %d %s (want 202)", resp.StatusCode, b)
	}
	var acc struct {
		ExecutionID string `json:"execution_id"`
		RequestID   string `json:"request_id"`
		Status      string `json:"status"`
	}
	_ = json.Unmarshal(b, &acc)
	loc := resp.Header.Get("Location")
	for _, path := range []string{loc, "/api/v1/executions/" + acc.RequestID} {
		resp, b = do(t, "GET", p.URL+path, "")
		var st struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(b, &st)
		if resp.StatusCode != http.StatusOK || st.Status != acc.Status {
			t.Errorf("GET %s of an accepted, queued execution: %d %s; want 200 with the 202's status %q (the 202's Location must resolve)", path, resp.StatusCode, b, acc.Status)
		}
	}
}

// TestIdempotencyKeyReusedForAnotherExecutionID: a second execute with an
// Idempotency-Key already used is the duplicate of the first (its
// answer), whatever workflow it carries: it does not index its own
// executionId. It was indexed against the first execution, so GET
// /api/v1/executions/<the second's executionId> answered the first run,
// and the second workflow never ran.
func TestIdempotencyKeyReusedForAnotherExecutionID(t *testing.T) {
	exec := workflow.New(workflow.Options{})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithWorkflow(exec), ingress.WithWorkflowRateLimits(ingress.RateLimits{})))
	p.Pool(workflow.Pool, exec)
	body := func(execID string) string {
		return `{"workflow":"{\"type\":\"operationUpdate\",\"operationId\":\"wait\",\"operation\":{\"Wait\":{\"duration\":1}}}\n` +
			`{\"type\":\"beginExecution\",\"executionId\":\"` + execID + `\",\"operationOrder\":[\"wait\"]}"}`
	}
	var first, second struct {
		RequestID string `json:"request_id"`
	}
	for _, c := range []struct {
		execID string
		into   any
	}{{"idem1", &first}, {"idem2", &second}} {
		resp, b := do(t, "POST", p.URL+"/api/v1/workflows/execute", body(c.execID), "Content-Type", "application/json", "Idempotency-Key", "k-1")
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, c.into) != nil {
			t.Fatalf("execute %s with Idempotency-Key k-1: %d %s", c.execID, resp.StatusCode, b)
		}
	}
	if first.RequestID == "" || second.RequestID != first.RequestID {
		t.Fatalf("the retry is not the duplicate: request ids %q, %q", first.RequestID, second.RequestID)
	}
	if resp, b := do(t, "GET", p.URL+"/api/v1/executions/idem2", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /api/v1/executions/idem2 (an executionId only the duplicate carried): %d %s; want 404", resp.StatusCode, b)
	}
	if resp, b := do(t, "GET", p.URL+"/api/v1/executions/idem1", ""); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), first.RequestID) {
		t.Errorf("GET /api/v1/executions/idem1: %d %s; want the first execution", resp.StatusCode, b)
	}
}
