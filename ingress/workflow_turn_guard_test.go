package ingress_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/normalizer"
	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// TestWorkflowExecutionTakesNoOtherTurn: alice's workflow, run over POST
// /a2e with executionId mix1, is a workflow execution's record in the
// task index; a message of hers naming mix1 as its task (an A2A v1.0
// message while the execution runs, an E2A request while it runs and once
// it has ended) is refused as a conflict, nothing published, and GET
// /api/v1/executions/mix1 still answers the execution's own result. Each
// was appended to the execution's record and sent to the workflow pool:
// the execution then read "failed", "params.workflow is missing". bob
// naming mix1 gets what he gets for any task of alice's (nothing tells
// him mix1 is a workflow execution).
func TestWorkflowExecutionTakesNoOtherTurn(t *testing.T) {
	api := testkit.NewHeld(t)
	pol := &workflow.Policy{}
	if err := pol.AllowHosts("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	p := aliceAndBobWorkflows(t, workflow.New(workflow.Options{Policy: pol}))
	ctx := t.Context()
	const conflictMsg = `task "mix1" is a workflow execution: it takes no other message; start a new execution`

	// alice's ordinary E2A task: what bob gets naming it is what he must
	// get naming mix1.
	if resp, b := do(t, "POST", p.url+"/v1/requests?wait=true", `{"task_id":"plain1","params":{"text":"hello"}}`, "X-Api-Key", testKey); resp.StatusCode != http.StatusOK {
		t.Fatalf("alice's E2A task plain1: %d %s", resp.StatusCode, b)
	}

	answer := testkit.Open(t, "POST", p.url+"/a2e", a2eWorkflowLine(t, "r-mix1",
		`{"type":"operationUpdate","operationId":"call","operation":{"ApiCall":{"method":"GET","url":"`+api.URL+`/slow","outputPath":"/workflow/r"}}}`,
		`{"type":"operationUpdate","operationId":"last","operation":{"Wait":{"duration":1}}}`,
		`{"type":"beginExecution","executionId":"mix1","operationOrder":["call","last"]}`),
		"X-Api-Key", testKey, "Content-Type", "application/x-ndjson")
	if answer.StatusCode != http.StatusOK {
		t.Fatalf("POST /a2e: %d", answer.StatusCode)
	}
	testkit.Receive(t, api.Arrived, 10*time.Second, "the workflow's ApiCall did not start")
	before := streamMsgs(t, p.js, streams.RequestsStream)

	// An A2A v1.0 message naming mix1 while it runs.
	alice := keyClient(t, p, a2a.TransportProtocolJSONRPC, testKey)
	msg := userMessage("hi")
	msg.Message.TaskID = "mix1"
	msg.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	res, err := alice.SendMessage(ctx, msg)
	if !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), conflictMsg) || strings.Contains(err.Error(), "principal") {
		t.Errorf("alice's A2A v1.0 message naming mix1 while it runs: %+v %v; want InvalidParams %q", res, err, conflictMsg)
	}
	t.Logf("alice's A2A v1.0 message naming mix1 while it runs: %v", err)
	// And a v0.3 message/send (JSON-RPC): its conflict, invalid params.
	resp, v03 := do(t, "POST", p.url+"/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user",`+
		`"messageId":"m-v03","taskId":"mix1","parts":[{"kind":"text","text":"hi"}]},"configuration":{"blocking":false}}}`, "X-Api-Key", testKey)
	var rpc struct {
		Error *struct {
			Code    int            `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(v03, &rpc) != nil || rpc.Error == nil || rpc.Error.Code != -32602 || rpc.Error.Data["conflict"] != true ||
		!strings.Contains(rpc.Error.Message, conflictMsg) {
		t.Errorf("alice's A2A v0.3 message/send naming mix1 while it runs: %d %s; want the conflict error -32602", resp.StatusCode, v03)
	}
	t.Logf("alice's A2A v0.3 message/send naming mix1 while it runs: %d %s", resp.StatusCode, v03)
	e2aTurn := func(when, reqID string) {
		t.Helper()
		resp, b := do(t, "POST", p.url+"/v1/requests", `{"request_id":"`+reqID+`","task_id":"mix1","params":{"text":"hi"}}`, "X-Api-Key", testKey)
		if e := e2aError(t, b); resp.StatusCode != http.StatusConflict || e.Code != e2aproto.CodeConflict || e.Message != conflictMsg {
			t.Errorf("alice's E2A request naming mix1 %s: %d %s; want 409 conflict", when, resp.StatusCode, b)
		}
		t.Logf("alice's E2A request naming mix1 %s: %d %s", when, resp.StatusCode, b)
		checkNotPublished(t, p.nc, reqID)
	}
	e2aTurn("while it runs", "e2a-on-mix1-running")

	api.Release()
	if b, err := io.ReadAll(answer.Body); err != nil || !strings.Contains(string(b), `"type":"`+normalizer.MethodWorkflowExecute+`/resp"`) {
		t.Fatalf("the /a2e answer (%v): %s", err, b)
	}
	e2aTurn("once it has ended", "e2a-on-mix1")
	if after := streamMsgs(t, p.js, streams.RequestsStream); after != before {
		t.Errorf("E2A_REQUESTS holds %d messages, %d before: a refused turn was published", after, before)
	}
	code, status, ops, b := executionStatus(t, p.url, "mix1", testKey)
	if code != http.StatusOK || status != workflow.StatusSuccess || len(ops) != 2 || ops["call"] != workflow.StatusSuccess ||
		ops["last"] != workflow.StatusSuccess {
		t.Errorf("alice GET /api/v1/executions/mix1: %d %s; want 200 success, its two operations success", code, b)
	}

	// bob: as for alice's ordinary task, on both doors.
	bobE2A := func(task string) (int, string) {
		resp, b := do(t, "POST", p.url+"/v1/requests", `{"request_id":"bob-on-`+task+`","task_id":"`+task+`","params":{"text":"hi"}}`, "X-Api-Key", bobKey)
		checkNotPublished(t, p.nc, "bob-on-"+task)
		return resp.StatusCode, string(b)
	}
	plainCode, plainBody := bobE2A("plain1")
	if code, body := bobE2A("mix1"); code != plainCode || body != plainBody || strings.Contains(body, "workflow") {
		t.Errorf("bob's E2A request naming mix1: %d %s; want what naming alice's task plain1 gets: %d %s", code, body, plainCode, plainBody)
	}
	bob := keyClient(t, p, a2a.TransportProtocolJSONRPC, bobKey)
	bobA2A := func(task string) string {
		m := userMessage("hi")
		m.Message.TaskID = a2a.TaskID(task)
		m.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
		res, err := bob.SendMessage(ctx, m)
		if err == nil {
			t.Errorf("bob's A2A v1.0 message naming %s: %+v; want refused", task, res)
			return ""
		}
		return strings.ReplaceAll(err.Error(), task, "ID")
	}
	if got, want := bobA2A("mix1"), bobA2A("plain1"); got != want || strings.Contains(got, "workflow") {
		t.Errorf("bob's A2A v1.0 message naming mix1: %s; want what naming alice's task plain1 gets: %s", got, want)
	}
}
