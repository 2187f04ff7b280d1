package ingress_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/workflow"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
)

// TestWorkflowExecutionIDNamingAnA2ATask: alice's A2A task asks for
// input; a workflow of hers whose executionId is that task's id is refused
// before anything is published, on both doors, with their conflict
// answer (REST: 409 in the API's error shape; /a2e: a conflict error
// line, not retryable), and the task still takes her answer. It became
// the task's next turn: the task completed with the workflow's result and
// her answer was refused (a task in a terminal state). bob's workflow
// with that executionId is answered as an executionId nobody holds (run,
// not indexed: nothing tells him the id exists).
func TestWorkflowExecutionIDNamingAnA2ATask(t *testing.T) {
	p := aliceAndBobWorkflows(t, workflow.New(workflow.Options{}))
	ctx := t.Context()
	alice := keyClient(t, p, a2a.TransportProtocolJSONRPC, testKey)
	task := up.Asked(t, ctx, alice, userMessage("ask:input the weather"))
	id := string(task.ID)
	wf := `{"type":"operationUpdate","operationId":"wait","operation":{"Wait":{"duration":1}}}` + "\n" +
		`{"type":"beginExecution","executionId":"` + id + `","operationOrder":["wait"]}`
	body, _ := json.Marshal(map[string]string{"workflow": wf})
	const msg = "executionId names a task that is not a workflow execution"

	before := streamMsgs(t, p.js, streams.RequestsStream)
	resp, b := do(t, "POST", p.url+"/api/v1/workflows/execute", string(body), "Authorization", "Bearer "+testKey)
	var rest struct {
		Error workflow.Error `json:"error"`
	}
	_ = json.Unmarshal(b, &rest)
	if resp.StatusCode != http.StatusConflict || rest.Error.Type != workflow.ValidationError || rest.Error.Message != msg || rest.Error.Retryable {
		t.Errorf("alice's REST execution named by her A2A task's id: %d %s; want 409 ValidationError %q, not retryable", resp.StatusCode, b, msg)
	}
	resp, b = do(t, "POST", p.url+"/a2e", a2eWorkflowLine(t, "r-task", strings.Split(wf, "\n")...), "X-Api-Key", testKey)
	var line struct {
		Type      string `json:"type"`
		Code      string `json:"code"`
		Message   string `json:"message"`
		Retryable *bool  `json:"retryable"`
	}
	_ = json.Unmarshal(b, &line)
	if resp.StatusCode != http.StatusOK || line.Type != "error" || line.Code != "conflict" || line.Message != msg ||
		line.Retryable == nil || *line.Retryable {
		t.Errorf("alice's /a2e execution named by her A2A task's id: %d %s; want the error line conflict %q, retryable false", resp.StatusCode, b, msg)
	}
	if after := streamMsgs(t, p.js, streams.RequestsStream); after != before {
		t.Errorf("E2A_REQUESTS holds %d messages, %d before: a refused execution was published", after, before)
	}

	// bob: as an executionId nobody holds, whatever alice's task is.
	resp, b = do(t, "POST", p.url+"/api/v1/workflows/execute", string(body), "Authorization", "Bearer "+bobKey)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"status":"`+workflow.StatusSuccess+`"`) {
		t.Errorf("bob's execution with alice's task id as executionId: %d %s; want 200 success", resp.StatusCode, b)
	}
	_, missing := do(t, "GET", p.url+"/api/v1/executions/no-such-exec", "", "Authorization", "Bearer "+bobKey)
	want := strings.ReplaceAll(string(missing), "no-such-exec", id)
	if code, _, _, b := executionStatus(t, p.url, id, bobKey); code != http.StatusNotFound || string(b) != want {
		t.Errorf("bob GET /api/v1/executions/%s: %d %s; want the 404 of a missing execution, %s", id, code, b, want)
	}

	got, err := alice.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("GetTask after the workflows: %+v %v; want input-required", got, err)
	}
	res, err := alice.SendMessage(ctx, up.Reply(task, "Paris"))
	if done, ok := res.(*a2a.Task); err != nil || !ok || done.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("alice's answer: %T %+v %v; want the task completed", res, res, err)
	}
}

// aliceAndBobWorkflows starts a pipeline with alice's and bob's keys
// (aliceAndBob), the demo pool and exec serving the workflow pool, the
// workflow API's rate limits off.
func aliceAndBobWorkflows(t *testing.T, exec *workflow.Executor) *pipeline {
	pp := pipetest.Start(t, pipetest.WithPush("127.0.0.1"), pipetest.WithIngress(ingress.WithWorkflow(exec),
		ingress.WithWorkflowRateLimits(ingress.RateLimits{}), ingress.WithAuth(aliceAndBob(t))))
	pp.Pool("demo", demo.New())
	pp.Pool(workflow.Pool, exec)
	return &pipeline{url: pp.URL, nc: pp.NC, js: pp.JS, in: pp.Ingress}
}
