package a2av1

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/normalizer"
)

// TestRESTQueryInvalidParams: an HTTP+JSON GetTask or ListTasks whose
// query parameter is not of its type (A2A v1.0 §11.5: numbers as decimal
// strings, booleans true or false, timestamps ISO 8601) is InvalidParams
// naming the parameter, as JSON-RPC answers the same parameter of the
// wrong type (§5.1: "Same Error Handling"; §3.3.2: validation errors
// SHOULD say which parameter failed and why). The SDK's handler answered
// them "invalid request", reason INVALID_REQUEST (JSON-RPC's -32600, a
// malformed call), naming nothing. GetTask's error names the task, as
// the SDK's other errors of that route do; a readable query is served.
func TestRESTQueryInvalidParams(t *testing.T) {
	fh := newFakeHost()
	fh.AddTask(key, task("a", "c1", normalizer.ProtocolA2A, "2026-11-25T10:00:00Z"))
	rest := Bindings(fh).REST
	get := func(path string) (int, string) {
		r := httptest.NewRequest(http.MethodGet, Path+path, nil)
		r.Header.Set("X-Api-Key", key)
		w := httptest.NewRecorder()
		rest.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	for _, tc := range []struct{ path, name string }{
		{"/tasks?pageSize=abc", "pageSize"},
		{"/tasks?historyLength=1.5", "historyLength"},
		{"/tasks?includeArtifacts=maybe", "includeArtifacts"},
		{"/tasks?statusTimestampAfter=2026-11-25", "statusTimestampAfter"},
		{"/tasks?lastUpdatedAfter=yesterday", "lastUpdatedAfter"},
		{"/tasks/a?historyLength=all", "historyLength"},
		{"/tasks?status=9", "status"},
		{"/tasks?status=-1", "status"},
		{"/tasks?status=4294967299", "status"},
	} {
		code, body := get(tc.path)
		if code != http.StatusBadRequest || !strings.Contains(body, `"reason":"INVALID_PARAMS"`) ||
			!strings.Contains(body, "invalid params: "+tc.name+" must be") {
			t.Errorf("GET %s: %d %s; want 400 INVALID_PARAMS naming %s, as JSON-RPC answers it", tc.path, code, body, tc.name)
		}
		if strings.HasPrefix(tc.path, "/tasks/a?") && !strings.Contains(body, `"taskId":"a"`) {
			t.Errorf("GET %s: %s; want the ErrorInfo naming task a", tc.path, body)
		}
	}
	for _, path := range []string{"/tasks?pageSize=5&historyLength=0&includeArtifacts=true&statusTimestampAfter=2026-11-25T00:00:00Z",
		"/tasks/a?historyLength=2", "/tasks?status=3", "/tasks?status=%2B3", "/tasks?status=03", "/tasks?status=TASK_STATE_COMPLETED",
		"/tasks?status=0"} {
		if code, body := get(path); code != http.StatusOK || !strings.Contains(body, `"id":"a"`) {
			t.Errorf("GET %s: %d %s; want task a", path, code, body)
		}
	}
	// A status by number is the TaskState of that number, as by name
	// (the gRPC-gateway's reading of an enum in a query): 3 (completed)
	// lists task a above, 1 (submitted) none.
	if code, body := get("/tasks?status=1"); code != http.StatusOK || strings.Contains(body, `"id":"a"`) {
		t.Errorf("GET /tasks?status=1: %d %s; want no task (a is completed)", code, body)
	}
	if code, body := get("/tasks?status=9"); !strings.Contains(body, "status must be a TaskState name (such as TASK_STATE_SUBMITTED) or its number (0 to 8), not 9") ||
		!strings.Contains(body, `"status":"INVALID_ARGUMENT"`) {
		t.Errorf("GET /tasks?status=9: %d %s; want 400 INVALID_ARGUMENT saying what status takes", code, body)
	}
}
