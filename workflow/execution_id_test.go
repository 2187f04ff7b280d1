package workflow

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestExecuteExecutionIDResolvesToThisExecution: the execute answer's
// execution_id must resolve, on GET /api/v1/executions/{id}, to the
// execution it answers (docs/protocols.md: "execution_id is the workflow's
// executionId, as in the specification, when it resolves to that
// execution for the caller"; "an executionId reused by the same principal
// resolves to the newest execution"). The ingress makes an
// Idempotency-Key the request id (ingress/server.go inputFrom), so a
// client that ran executionId "exec-1" with Idempotency-Key "exec-1" and
// then runs executionId "exec-1" again is answered execution_id "exec-1"
// for the second run, and the GET of it answers the first run.
func TestExecuteExecutionIDResolvesToThisExecution(t *testing.T) {
	en := newEnv(t, nil)
	frames := &memFrames{writers: map[string]*agenttest.Writer{}, tasks: map[string][]string{}}
	sub := &memSubmitter{m: frames, h: en.e}
	a := &API{Executor: en.e, Submitter: sub, Frames: frames, Tasks: frames,
		Authenticate: func(r *http.Request) (Principal, error) { return Principal{ID: "alice"}, nil },
		// as the ingress builds it: the Idempotency-Key is the request id
		NewEnvelope: func(r *http.Request, p Principal, wf string) (*e2a.Envelope, error) {
			env, err := NewEnvelope(r, p, wf)
			if err == nil && r.Header.Get("Idempotency-Key") != "" {
				env.RequestID = r.Header.Get("Idempotency-Key")
			}
			return env, err
		},
	}
	mux := http.NewServeMux()
	a.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	call := func(method, path, key, body string) map[string]any {
		t.Helper()
		var hdr []string
		if key != "" {
			hdr = []string{"Idempotency-Key", key}
		}
		resp, b := testkit.Do(t, method, srv.URL+path, body, hdr...)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return m
	}
	wf := func(d int) string {
		return workflowBody(lines(op("w", `{"Wait":{"duration":`+strconv.Itoa(d)+`}}`),
			`{"type":"beginExecution","executionId":"exec-1","operationOrder":["w"]}`))
	}
	first := call("POST", "/api/v1/workflows/execute", "exec-1", wf(1))
	second := call("POST", "/api/v1/workflows/execute", "", wf(2))
	if first["request_id"] == second["request_id"] {
		t.Fatalf("one execution: %v %v", first, second)
	}
	got := call("GET", "/api/v1/executions/"+second["execution_id"].(string), "", "")
	if got["request_id"] != second["request_id"] {
		t.Errorf("execute answered execution_id %q for request %v; GET of it answers request %v (results %v), not this execution",
			second["execution_id"], second["request_id"], got["request_id"], got["results"])
	}
}
