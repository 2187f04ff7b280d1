package ingress_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// TestA2EWorkflowRetryIsStatusEvent: over POST /a2e, the notice of an
// ApiCall retried (the executor's custom chunk {event: "a2e.retry", …}) is
// an invoke/event of kind status, as the plan is (A2EEvent: "status
// message"). Its chunk named no kind, so it was rendered an artifact, the
// kind of what a call produces: a client collecting the artifacts got
// the retry notices with them.
func TestA2EWorkflowRetryIsStatusEvent(t *testing.T) {
	var calls atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(api.Close)
	pol := &workflow.Policy{}
	if err := pol.AllowHosts("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	exec := workflow.New(workflow.Options{Policy: pol, Retry: workflow.RetryPolicy{MaxRetries: 1, InitialDelay: time.Millisecond,
		MaxDelay: time.Millisecond, Multiplier: 1}})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithWorkflow(exec), ingress.WithWorkflowRateLimits(ingress.RateLimits{})))
	p.Pool(workflow.Pool, exec)

	body := a2eWorkflowLine(t, "r-retry",
		`{"type":"operationUpdate","operationId":"call","operation":{"ApiCall":{"method":"GET","url":"`+api.URL+`/flaky","outputPath":"/workflow/r"}}}`,
		`{"type":"beginExecution","executionId":"exec-retry","operationOrder":["call"]}`)
	answer, err := io.ReadAll(testkit.Open(t, "POST", p.URL+"/a2e", body, "Content-Type", "application/x-ndjson").Body)
	if err != nil {
		t.Fatal(err)
	}
	retries := 0
	for _, line := range strings.Split(strings.TrimSpace(string(answer)), "\n") {
		var m struct {
			Kind string         `json:"kind"`
			Data map[string]any `json:"data"`
		}
		if json.Unmarshal([]byte(line), &m) != nil || m.Data["event"] != "a2e.retry" {
			continue
		}
		if retries++; m.Kind != "status" || m.Data["operationId"] != "call" || m.Data["attempt"] != float64(1) {
			t.Errorf("the retry's line: %s; want an invoke/event of kind status naming call, attempt 1", line)
		}
	}
	if retries != 1 || !strings.Contains(string(answer), `"status":"`+workflow.StatusSuccess+`"`) {
		t.Errorf("%d retry lines; want 1, then success:\n%s", retries, answer)
	}
}
