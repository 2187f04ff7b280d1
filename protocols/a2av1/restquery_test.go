package a2av1

import (
	"encoding/json"
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
	get := restGetTaskA()
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

// TestRESTQueryNames: an HTTP+JSON GET's query is read as the gRPC-gateway
// reads a2a.proto's request from it (runtime.PopulateQueryParameters, the
// binding's reference): a field by its proto name (context_id) as by its
// JSON name; a parameter given twice ("too many values"), a value the
// gateway cannot read (an empty one, a number beyond 32 bits, a status
// that names no TaskState) or a path into a field (page_size.x) is 400
// INVALID_ARGUMENT naming the parameter; a field by both its names,
// which the gateway reads one of at random, is refused too; a parameter
// of no field is ignored. The SDK's handler read the JSON names alone,
// the first of repeated values, an empty value as none.
func TestRESTQueryNames(t *testing.T) {
	get := restGetTaskA()
	for _, tc := range []struct {
		path   string
		listed bool // task a in the answer
	}{
		{"/tasks?context_id=c1", true},
		{"/tasks?context_id=other", false},
		{"/tasks?contextId=other", false},
		{"/tasks?status=TASK_STATE_SUBMITTED", false},
		{"/tasks?page_size=5&history_length=0&include_artifacts=true&status_timestamp_after=2026-11-25T00:00:00Z&page_token=", true},
		{"/tasks?status_timestamp_after=2026-11-26T00:00:00Z", false},
		{"/tasks?include_artifacts=1&contextId=", true},
		{"/tasks?foo=1&foo=2&pagesize=x&PageSize=y&x.y=1", true},
		{"/tasks/a?history_length=1", true},
	} {
		code, body := get(tc.path)
		if code != http.StatusOK || strings.Contains(body, `"id":"a"`) != tc.listed {
			t.Errorf("GET %s: %d %s; want 200, task a listed: %v", tc.path, code, body, tc.listed)
		}
	}
	for _, tc := range []struct{ path, says string }{
		{"/tasks?pageSize=1&pageSize=2", `"pageSize" is given 2 times`},
		{"/tasks?context_id=a&context_id=a", `"context_id" is given 2 times`},
		{"/tasks?pageSize[x]=1", `"pageSize[x]" is given 2 times`},
		{"/tasks?page_size=1&pageSize=1", `pageSize is given as "pageSize" and as "page_size"`},
		{"/tasks?statusTimestampAfter=2026-11-25T00:00:00Z&status_timestamp_after=2026-11-25T00:00:00Z", `statusTimestampAfter is given as`},
		{"/tasks?page_size=abc", "pageSize must be an integer"},
		{"/tasks?pageSize=", "pageSize must be an integer"},
		{"/tasks?pageSize=4294967299", "pageSize must be an integer (a 32-bit one"},
		{"/tasks?include_artifacts=", "includeArtifacts must be true or false"},
		{"/tasks?status=", "status must be a TaskState name"},
		{"/tasks?status=completed", `status must be a TaskState name (such as TASK_STATE_SUBMITTED) or its number (0 to 8), not "completed"`},
		{"/tasks?status_timestamp_after=0000-12-31T00:00:00Z", "statusTimestampAfter must be an RFC 3339 timestamp"},
		{"/tasks?status_timestamp_after.seconds=5", "statusTimestampAfter is read whole"},
		{"/tasks?page_size.x=1", `"page_size.x": pageSize has no fields`},
		{"/tasks/a?history_length=x", "historyLength must be an integer"},
		{"/tasks/a?historyLength=1&historyLength=1", `"historyLength" is given 2 times`},
		{"/tasks/a/pushNotificationConfigs?page_size=x", "pageSize must be an integer"},
	} {
		code, body := get(tc.path)
		var st restStatus
		_ = json.Unmarshal([]byte(body), &st)
		if code != http.StatusBadRequest || st.Error.Status != "INVALID_ARGUMENT" || st.reason() != "INVALID_PARAMS" ||
			!strings.Contains(st.Error.Message, tc.says) {
			t.Errorf("GET %s: %d %s; want 400 INVALID_ARGUMENT saying %s", tc.path, code, body, tc.says)
		}
		if strings.HasPrefix(tc.path, "/tasks/a") && !strings.Contains(body, `"taskId":"a"`) {
			t.Errorf("GET %s: %s; want the ErrorInfo naming task a", tc.path, body)
		}
	}
}

// restGetTaskA is a GET of the HTTP+JSON binding (path under Path) by the
// caller of key, who has task a (context c1, completed), and its answer.
func restGetTaskA() func(path string) (int, string) {
	fh := newFakeHost()
	fh.AddTask(key, task("a", "c1", normalizer.ProtocolA2A, "2026-11-25T10:00:00Z"))
	call := restCaller(fh)
	return func(path string) (int, string) { return call(http.MethodGet, path) }
}

// restCaller is a call of the HTTP+JSON binding over fh (method, path
// under Path, no body) by the caller of key, and its answer.
func restCaller(fh fakeHost) func(method, path string) (int, string) {
	rest := Bindings(fh).REST
	return func(method, path string) (int, string) {
		r := httptest.NewRequest(method, Path+path, nil)
		r.Header.Set("X-Api-Key", key)
		if method == http.MethodPost {
			r.Header.Set("Content-Type", "application/json")
		}
		w := httptest.NewRecorder()
		rest.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
}

// TestRESTQueryMalformed: a query that is no URL-encoded form (an escape
// that is none, %zz; a semicolon, which Go no longer reads as a
// separator) on a route whose query the gRPC-gateway reads (the GETs,
// DeleteTaskPushNotificationConfig) is 400 INVALID_ARGUMENT,
// INVALID_PARAMS, naming what is wrong, as the gateway answers it (its
// generated code runs req.ParseForm and answers its error
// InvalidArgument). URL.Query() dropped the pairs it could not read
// and the call went on: GET /tasks?pageSize=%G1 listed with the default
// page size. A route whose query the gateway does not read (a body of
// "*": message:send, a cancel; a path tenant's route whose path holds
// every field of its request) ignores it, as the gateway does.
func TestRESTQueryMalformed(t *testing.T) {
	fh := newFakeHost()
	fh.AddTask(key, task("a", "c1", normalizer.ProtocolA2A, "2026-11-25T10:00:00Z"))
	call := restCaller(fh)
	for _, tc := range []struct{ method, path, says string }{
		{http.MethodGet, "/tasks?%zz", `invalid URL escape "%zz"`},
		{http.MethodGet, "/tasks?pageSize=%G1", `invalid URL escape "%G1"`},
		{http.MethodGet, "/tasks?foo=%", `invalid URL escape "%"`}, // a parameter of no field: the gateway parses the whole query
		{http.MethodGet, "/tasks?pageSize=1;historyLength=2", "invalid semicolon separator in query"},
		{http.MethodGet, "/tasks/a?historyLength=%zz", `invalid URL escape "%zz"`},
		{http.MethodGet, "/tasks/a:subscribe?%zz", `invalid URL escape "%zz"`},
		{http.MethodGet, "/tasks/a/pushNotificationConfigs?%zz", `invalid URL escape "%zz"`},
		{http.MethodGet, "/tasks/a/pushNotificationConfigs/c?%zz", `invalid URL escape "%zz"`},
		{http.MethodDelete, "/tasks/a/pushNotificationConfigs/c?%zz", `invalid URL escape "%zz"`},
		{http.MethodGet, "/extendedAgentCard?%zz", `invalid URL escape "%zz"`},
		{http.MethodGet, "/demo/tasks?%zz", `invalid URL escape "%zz"`}, // ListTasks' other fields are still read
	} {
		code, body := call(tc.method, tc.path)
		var st restStatus
		_ = json.Unmarshal([]byte(body), &st)
		if code != http.StatusBadRequest || st.Error.Status != "INVALID_ARGUMENT" || st.reason() != "INVALID_PARAMS" ||
			!strings.Contains(st.Error.Message, "query") || !strings.Contains(st.Error.Message, tc.says) {
			t.Errorf("%s %s: %d %s; want 400 INVALID_ARGUMENT, INVALID_PARAMS, saying the query has %s", tc.method, tc.path, code, body, tc.says)
		}
		if strings.HasPrefix(tc.path, "/tasks/a") && !strings.Contains(body, `"taskId":"a"`) {
			t.Errorf("%s %s: %s; want the ErrorInfo naming task a", tc.method, tc.path, body)
		}
	}
	for _, tc := range []struct{ method, path string }{
		{http.MethodPost, "/tasks/a:cancel?%zz"},
		{http.MethodGet, "/demo/tasks/a:subscribe?%zz"},
		{http.MethodGet, "/demo/extendedAgentCard?%zz"},
	} {
		if _, body := call(tc.method, tc.path); strings.Contains(body, "invalid URL escape") {
			t.Errorf("%s %s: %s; want the query ignored, as the gateway reads none there", tc.method, tc.path, body)
		}
	}
}
