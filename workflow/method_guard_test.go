package workflow

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
	"github.com/e2a-pipeline/pipeline/normalizer"
)

// TestServeRunsWorkflowMethodOnly: the worker runs the workflow of an
// a2e.workflow.execute envelope only; another method sent to its pool
// (?agent=workflow with {"type":"tool.run","workflow":…}) is answered with
// validation_error, not retryable, and nothing runs: its ApiCall was made,
// the workflow's secrets with it.
func TestServeRunsWorkflowMethodOnly(t *testing.T) {
	if Method != normalizer.MethodWorkflowExecute {
		t.Fatalf("workflow.Method %q, normalizer.MethodWorkflowExecute %q", Method, normalizer.MethodWorkflowExecute)
	}
	var hits atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(api.Close)
	wf := lines(
		op("call", `{"ApiCall":{"method":"GET","url":"`+api.URL+`/x","outputPath":"/workflow/x"}}`),
		begin("call"))
	exec := New(Options{Policy: examplePolicy(t, "127.0.0.1")})
	for _, method := range []string{"tool.run", "", "ext", "a2e.workflow.execute.x"} {
		env := &e2a.Envelope{ProtocolVersion: "1.0", RequestID: "m-1", Method: method, UserID: "agent-1",
			Params: map[string]any{ParamWorkflow: wf}, Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceA2E}}
		w := &agenttest.Writer{Env: env}
		err := exec.Serve(tctx(t), env, w)
		var ae *agent.Error
		if !errors.As(err, &ae) || ae.Code != "validation_error" || ae.Retryable {
			t.Fatalf("method %q: Serve = %v, want a validation_error, not retryable", method, err)
		}
		if n := len(w.Frames()); n != 0 {
			t.Errorf("method %q: %d frames written", method, n)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the ApiCall was made %d time(s)", n)
	}
	// The workflow method still runs.
	env := &e2a.Envelope{ProtocolVersion: "1.0", RequestID: "m-2", Method: Method, UserID: "agent-1",
		Params: map[string]any{ParamWorkflow: wf}, Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceA2E}}
	if err := exec.Serve(tctx(t), env, &agenttest.Writer{Env: env}); err != nil {
		t.Fatal(err)
	}
	if hits.Load() != 1 {
		t.Fatalf("the workflow's ApiCall was made %d time(s), want 1", hits.Load())
	}
}
