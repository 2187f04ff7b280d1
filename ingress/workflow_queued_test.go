package ingress_test

import (
	"encoding/json"
	"net/http"
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
