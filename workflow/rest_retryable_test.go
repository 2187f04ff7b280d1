package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
)

type failingSubmitter struct{}

func (failingSubmitter) Submit(context.Context, *e2a.Envelope) error {
	return errors.New("no JetStream")
}

// TestRESTErrorsSayRetryable: the REST API's error objects carry
// retryable (the A2E rule: an error says whether to retry), as the
// e2a.error frame and the A2E NDJSON error line do. It was never shown:
// a REST client could not tell an execution interrupted by a worker's
// crash (run it again) from a workflow that cannot succeed, nor a 503 of
// a queue that is down from a refusal.
func TestRESTErrorsSayRetryable(t *testing.T) {
	en := newEnv(t, nil)
	frames := &memFrames{writers: map[string]*agenttest.Writer{}, tasks: map[string][]string{}}
	// Final error frames as stored: one the runtime wrote (no executor
	// error in its details), one the executor wrote before errors said
	// retryable (its details.error has no retryable member; the frame's
	// own retryable is authoritative), one not retryable.
	write := func(id string, body e2a.ErrorBody) {
		w := &agenttest.Writer{Env: &e2a.Envelope{RequestID: id, UserID: "agent-1", Method: Method}}
		if err := w.Write(e2a.KindError, e2a.StatusFailed, body, true); err != nil {
			t.Fatal(err)
		}
		frames.writers[id] = w
	}
	write("r-interrupted", e2a.ErrorBody{Code: e2a.ErrCodeAgentInterrupted, Message: "the worker stopped", Retryable: true})
	write("r-503", e2a.ErrorBody{Code: "ExecutionError", Message: "API call failed", Retryable: true,
		Details: map[string]any{"error": map[string]any{"type": ExecutionError, "message": "API call failed", "details": map[string]any{"statusCode": 503}}}})
	write("r-invalid", e2a.ErrorBody{Code: "DataError", Message: "no such path", Retryable: false,
		Details: map[string]any{"error": map[string]any{"type": DataError, "message": "no such path"}}})

	a := &API{Executor: en.e, Submitter: failingSubmitter{}, Frames: frames, Tasks: frames,
		Authenticate: func(r *http.Request) (Principal, error) { return Principal{ID: "agent-1"}, nil }}
	mux := http.NewServeMux()
	a.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	errorOf := func(method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m struct {
			Error map[string]any `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp.StatusCode, m.Error
	}
	for id, want := range map[string]bool{"r-interrupted": true, "r-503": true, "r-invalid": false} {
		code, e := errorOf("GET", "/api/v1/executions/"+id, "")
		if code != 200 || e == nil || e["retryable"] != want {
			t.Errorf("execution %s: %d, error %v; want retryable %v", id, code, e, want)
		}
	}
	wf := strings.ReplaceAll(example2, "https://api.example.com", en.api.URL)
	code, e := errorOf("POST", "/api/v1/workflows/execute", workflowBody(wf))
	if code != http.StatusServiceUnavailable || e == nil || e["retryable"] != true {
		t.Errorf("execute with the queue down: %d, error %v; want 503 retryable", code, e)
	}
	code, e = errorOf("POST", "/api/v1/workflows/execute", `{"workflow":"not jsonl"}`)
	if code != http.StatusBadRequest || e == nil || e["retryable"] != false {
		t.Errorf("invalid workflow: %d, error %v; want 400 not retryable", code, e)
	}
}
