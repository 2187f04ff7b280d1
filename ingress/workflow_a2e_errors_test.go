package ingress_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/protocols/a2e"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// postA2E posts body to path and returns the A2E lines of the answer.
func postA2E(t *testing.T, p *pipeline, path, body string) []a2e.Message {
	t.Helper()
	resp := p.post(t, path, "application/x-ndjson", body)
	var out []a2e.Message
	dec := json.NewDecoder(resp.Body)
	for dec.More() {
		var m a2e.Message
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// TestA2EInvalidPoolNotRetryable: POST /a2e?agent=a.b (not a valid pool
// name) is answered invalid_agent, not retryable, as POST
// /v1/requests?agent=a.b is (400 invalid_agent). It was "unavailable",
// retryable, though no retry can succeed.
func TestA2EInvalidPoolNotRetryable(t *testing.T) {
	p := startPipeline(t)
	msgs := postA2E(t, p, "/a2e?agent=a.b", `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1","text":"x"}`+"\n")
	if len(msgs) != 1 || msgs[0].Type != a2e.ErrorType || msgs[0].ReqID != "r-1" {
		t.Fatalf("answer %+v, want one error line", msgs)
	}
	if m := msgs[0]; m.Retryable == nil || *m.Retryable || m.Code != "invalid_agent" {
		t.Errorf("?agent=a.b answered %q retryable=true (%q); want not retryable", m.Code, m.Message)
	}
}

// execAnswer is an execute or executions answer.
type execAnswer struct {
	ExecutionID string `json:"execution_id"`
	RequestID   string `json:"request_id"`
	Status      string `json:"status"`
	Error       struct {
		Type string `json:"type"`
	} `json:"error"`
}

func execCall(t *testing.T, method, u, key, body string) (int, http.Header, execAnswer) {
	t.Helper()
	hdr := []string{"Content-Type", "application/json"}
	if key != "" {
		hdr = append(hdr, "Authorization", "Bearer "+key)
	}
	resp, b := do(t, method, u, body, hdr...)
	var e execAnswer
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, resp.Header, e
}

const waitWorkflow = `{"workflow":"{\"type\":\"operationUpdate\",\"operationId\":\"wait\",\"operation\":{\"Wait\":{\"duration\":5}}}\n{\"type\":\"beginExecution\",\"executionId\":\"exec-r\",\"operationOrder\":[\"wait\"]}"}`

// TestReusedExecutionIDWhileQueued: alice runs exec-r (it succeeds), then
// runs exec-r again while no worker is there: execute answers 202,
// execution_id "exec-r", Location /api/v1/executions/exec-r, and that
// Location answers the new, queued execution ("running"), the newest, as
// the docs say. It answered the first, finished one: GET by executionId
// skipped an execution with no frame yet.
func TestReusedExecutionIDWhileQueued(t *testing.T) {
	exec := workflow.New(workflow.Options{Limits: workflow.Limits{MaxExecutionTime: time.Second}})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithWorkflow(exec), ingress.WithWorkflowRateLimits(ingress.RateLimits{}),
		ingress.WithAuth(aliceAndBob(t))))
	stop := p.Pool(workflow.Pool, exec)
	code, _, first := execCall(t, "POST", p.URL+"/api/v1/workflows/execute", testKey, waitWorkflow)
	if code != http.StatusOK || first.Status != workflow.StatusSuccess || first.ExecutionID != "exec-r" {
		t.Fatalf("first execute: %d %+v", code, first)
	}
	stop() // no worker now: the next execution stays queued
	code, hdr, second := execCall(t, "POST", p.URL+"/api/v1/workflows/execute", testKey, waitWorkflow)
	if code != http.StatusAccepted || second.ExecutionID != "exec-r" || second.RequestID == first.RequestID {
		t.Fatalf("second execute: %d %+v (want 202 exec-r)", code, second)
	}
	loc := hdr.Get("Location")
	code, _, got := execCall(t, "GET", p.URL+loc, testKey, "")
	if code != http.StatusOK || got.RequestID != second.RequestID || got.Status != workflow.StatusRunning {
		t.Errorf("GET %s after the 202: %d request_id %s status %q; want the queued execution %s, %q (the first was %s)",
			loc, code, got.RequestID, got.Status, second.RequestID, workflow.StatusRunning, first.RequestID)
	}
}

// TestQueuedExecutionScoped: alice's execution,
// accepted and queued (no worker), is "running" for her by request id and
// executionId; bob gets the same 404 DataError for both as for an id that
// does not exist.
func TestQueuedExecutionScoped(t *testing.T) {
	exec := workflow.New(workflow.Options{Limits: workflow.Limits{MaxExecutionTime: time.Second}})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithWorkflow(exec), ingress.WithWorkflowRateLimits(ingress.RateLimits{}),
		ingress.WithAuth(aliceAndBob(t))))
	p.Pool(workflow.Pool, exec)() // the pool is known, no worker runs
	code, _, acc := execCall(t, "POST", p.URL+"/api/v1/workflows/execute", testKey, waitWorkflow)
	if code != http.StatusAccepted || acc.RequestID == "" {
		t.Fatalf("execute: %d %+v", code, acc)
	}
	ids := []string{acc.RequestID, "exec-r"}
	for _, id := range ids {
		if code, _, st := execCall(t, "GET", p.URL+"/api/v1/executions/"+url.PathEscape(id), testKey, ""); code != 200 || st.Status != workflow.StatusRunning {
			t.Errorf("alice GET %s: %d %+v", id, code, st)
		}
	}
	for _, id := range append(ids, "no-such-exec") {
		resp, b := do(t, "GET", p.URL+"/api/v1/executions/"+url.PathEscape(id), "", "Authorization", "Bearer "+bobKey)
		want := `{"error":{"type":"DataError","message":"execution \"` + id + `\" not found","retryable":false}}`
		if resp.StatusCode != http.StatusNotFound || strings.TrimSpace(string(b)) != want {
			t.Errorf("bob GET %s: %d %s; want 404 %s", id, resp.StatusCode, b, want)
		}
	}
	// An execution is also an A2A task (task id = executionId): bob can
	// neither read nor cancel alice's, and it stays running for her.
	for _, method := range []string{"tasks/get", "tasks/cancel"} {
		_, b := do(t, "POST", p.URL+"/a2a", `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{"id":"exec-r"}}`,
			"Authorization", "Bearer "+bobKey, "Content-Type", "application/json")
		if !strings.Contains(string(b), `"error"`) || strings.Contains(string(b), `"result"`) {
			t.Errorf("bob %s exec-r: %s; want an error", method, b)
		}
	}
	if code, _, st := execCall(t, "GET", p.URL+"/api/v1/executions/exec-r", testKey, ""); code != 200 || st.Status != workflow.StatusRunning || st.RequestID != acc.RequestID {
		t.Errorf("alice GET exec-r after bob's cancel: %d %+v", code, st)
	}
}
