package workflow

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestRunningExecutionStatus: while an execution runs, its status (GET
// /api/v1/executions/{id}, rebuilt from the frames stored so far) shows
// what is known: the client's executionId and every operation's state,
// pending, running or ended. It listed no operation but the ended ones and
// no workflow_execution_id until the final frame. Once ended, the answer
// is as before: the runs that ended.
func TestRunningExecutionStatus(t *testing.T) {
	n := startNATS(t)
	api := testkit.NewHeld(t)
	exec := New(Options{Policy: examplePolicy(t, "127.0.0.1")})
	runPool(t, n.connect(t), exec)
	src := &StreamFrames{Conn: n.nc}
	rest := &API{Executor: exec, Submitter: jsSubmitter{n.js}, Frames: src}
	mux := http.NewServeMux()
	rest.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	wf := lines(
		op("first", `{"Wait":{"duration":1}}`),
		op("call", `{"ApiCall":{"method":"GET","url":"`+api.URL+`/slow","outputPath":"/workflow/r"}}`),
		op("last", `{"Wait":{"duration":1}}`),
		`{"type":"beginExecution","executionId":"exec-running","operationOrder":["first","call","last"]}`)
	env := &e2a.Envelope{ProtocolVersion: "1.0", RequestID: "running-1", Method: Method, UserID: Anonymous,
		Params: map[string]any{"workflow": wf}, Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceA2E}}
	if err := (jsSubmitter{n.js}).Submit(tctx(t), env); err != nil {
		t.Fatal(err)
	}
	testkit.Receive(t, api.Arrived, 10*time.Second, "the ApiCall did not start")

	opStates := func(body map[string]any) map[string]string {
		out := map[string]string{}
		ops, _ := body["operations"].([]any)
		for _, o := range ops {
			m, _ := o.(map[string]any)
			id, _ := m["operationId"].(string)
			out[id], _ = m["status"].(string)
		}
		return out
	}
	code, body := doJSON(t, "GET", srv.URL+"/api/v1/executions/running-1", "")
	want := map[string]string{"first": StatusSuccess, "call": StatusRunning, "last": StatusPending}
	if got := opStates(body); code != 200 || body["status"] != StatusRunning || body["workflow_execution_id"] != "exec-running" ||
		len(got) != 3 || got["first"] != want["first"] || got["call"] != want["call"] || got["last"] != want["last"] {
		t.Errorf("running: %d %v; want workflow_execution_id exec-running and operations %v", code, body, want)
	}
	if ops, _ := body["operations"].([]any); len(ops) == 3 {
		if m, _ := ops[2].(map[string]any); m["type"] != OpWait {
			t.Errorf("the pending operation's type: %v", m)
		}
	}

	api.Release()
	if _, err := rest.waitFinal(tctx(t), "running-1"); err != nil {
		t.Fatal(err)
	}
	code, body = doJSON(t, "GET", srv.URL+"/api/v1/executions/running-1", "")
	if got := opStates(body); code != 200 || body["status"] != StatusSuccess || len(body["operations"].([]any)) != 3 ||
		got["first"] != StatusSuccess || got["call"] != StatusSuccess || got["last"] != StatusSuccess {
		t.Errorf("ended: %d %v", code, body)
	}
}

// TestQueuedExecutionStatus: an execution no worker has started (no
// frame yet) is answered running with its plan, read from the envelope the
// answer already reads (QueuedSource): every operation pending and the
// client's executionId. It listed none.
func TestQueuedExecutionStatus(t *testing.T) {
	n := startNATS(t)
	rest := &API{Executor: New(Options{}), Frames: &StreamFrames{Conn: n.nc}}
	mux := http.NewServeMux()
	rest.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	wf := lines(op("a", `{"Wait":{"duration":1}}`), op("b", `{"Wait":{"duration":1}}`),
		`{"type":"beginExecution","executionId":"exec-queued","operationOrder":["a","b"]}`)
	env := &e2a.Envelope{ProtocolVersion: "1.0", RequestID: "queued-1", Method: Method, UserID: Anonymous,
		Params: map[string]any{"workflow": wf}, Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceA2E}}
	if err := (jsSubmitter{n.js}).Submit(tctx(t), env); err != nil {
		t.Fatal(err)
	}
	code, body := doJSON(t, "GET", srv.URL+"/api/v1/executions/queued-1", "")
	ops, _ := body["operations"].([]any)
	if code != 200 || body["status"] != StatusRunning || body["workflow_execution_id"] != "exec-queued" || len(ops) != 2 {
		t.Fatalf("queued: %d %v", code, body)
	}
	for i, o := range ops {
		if m, _ := o.(map[string]any); m["operationId"] != []string{"a", "b"}[i] || m["status"] != StatusPending || m["type"] != OpWait {
			t.Errorf("operation %d: %v", i, m)
		}
	}
}

// TestPlanFrameBounded: an operationOrder listing one operation thousands
// of times is not listed in the plan frame, which must fit in one message
// (the frame would pass max_payload and the execution fail).
func TestPlanFrameBounded(t *testing.T) {
	order := strings.TrimSuffix(strings.Repeat(`"a",`, 20000), ",")
	wf, res := Parse(lines(op("a", `{"Wait":{"duration":1}}`), `{"type":"beginExecution","executionId":"e1","operationOrder":[`+order+`]}`))
	if !res.Valid {
		t.Fatalf("%+v", res.Errors)
	}
	w := &agenttest.Writer{}
	obs := &frameObserver{w: w, wf: wf, max: 4 << 10, maxPlan: 256 << 10}
	if err := obs.begin("r1"); err != nil {
		t.Fatal(err)
	}
	frames := w.Frames()
	if len(frames) != 1 || len(frames[0].Body) > 1<<10 || !strings.Contains(string(frames[0].Body), `"operations":[]`) {
		t.Errorf("plan frame of %d bytes", len(frames[0].Body))
	}
}
