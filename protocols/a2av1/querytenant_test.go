package a2av1

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/normalizer"
)

// TestRESTQueryTenant: an HTTP+JSON call of a route without a `/{tenant}`
// segment and without a body (a2a.proto's GETs and its DELETE) carries
// its request's tenant in the query, as the gRPC-gateway reads it
// (runtime.PopulateQueryParameters fills the request's tenant field:
// GET /tasks/a?tenant=demo), with the path tenant's rules (pooltenant.go):
// ListTasks lists that pool's tasks; an invalid pool name, or a tenant
// naming another pool than the interface's (?agent=), is 400
// INVALID_ARGUMENT; a tenant given twice, or a path into it, is refused as
// the gateway refuses it. A path tenant wins: the gateway's route of
// `/{tenant}/…` filters the query's tenant out. A route whose body is
// "*" (message:send, a cancel, a push config's creation) reads no query
// (the gateway's generated code parses none for it): its tenant is the
// body's. The query's tenant was ignored: GET /tasks?tenant=echo listed
// every pool's tasks.
func TestRESTQueryTenant(t *testing.T) {
	fh := newFakeHost()
	for _, tk := range []struct{ id, pool string }{{"a", "demo"}, {"b", "echo"}} {
		lt := task(tk.id, "c1", normalizer.ProtocolA2A, "2026-11-25T10:00:00Z")
		lt.Pool = tk.pool
		fh.AddTask(key, lt)
	}
	call := restCaller(fh)
	for _, tc := range []struct {
		path  string
		tasks string // the tasks listed, in the answer's order
	}{
		{"/tasks?tenant=echo", "b"},
		{"/tasks?tenant=demo", "a"},
		{"/tasks?tenant=", "a b"},
		{"/tasks?tenant=echo&agent=echo", "b"},
		{"/echo/tasks?tenant=demo", "b"},                  // the path's tenant wins
		{"/echo/tasks?tenant=x&tenant=y&tenant.z=1", "b"}, // and the query's is not read
		{"/tasks/a?tenant=echo", "a"},                     // a task is read on every pool's interface
	} {
		code, body := call(http.MethodGet, tc.path)
		if got := listedIDs(body); code != http.StatusOK || got != tc.tasks {
			t.Errorf("GET %s: %d %s; want 200 with %s", tc.path, code, body, tc.tasks)
		}
	}
	for _, tc := range []struct{ method, path, says string }{
		{http.MethodGet, "/tasks?tenant=echo&agent=demo", `tenant "echo" names another agent pool than this interface's ("demo")`},
		{http.MethodGet, "/tasks/a?tenant=not%20a%20pool", `"not a pool" is not a valid agent pool name`},
		{http.MethodGet, "/tasks?tenant=not%20a%20pool", `"not a pool" is not a valid agent pool name`},
		{http.MethodGet, "/tasks/a?tenant=demo&tenant=demo", `"tenant" is given 2 times`},
		{http.MethodGet, "/tasks?tenant[x]=demo", `"tenant[x]" is given 2 times`},
		{http.MethodGet, "/tasks?tenant.x=demo", `"tenant.x": tenant has no fields`},
		{http.MethodGet, "/tasks/a:subscribe?tenant=echo&agent=demo", "names another agent pool"},
		{http.MethodGet, "/tasks/a/pushNotificationConfigs?tenant=echo&agent=demo", "names another agent pool"},
		{http.MethodGet, "/tasks/a/pushNotificationConfigs/c?tenant=echo&agent=demo", "names another agent pool"},
		{http.MethodDelete, "/tasks/a/pushNotificationConfigs/c?tenant=echo&agent=demo", "names another agent pool"},
		{http.MethodGet, "/extendedAgentCard?tenant=echo&agent=demo", "names another agent pool"},
	} {
		code, body := call(tc.method, tc.path)
		var st restStatus
		_ = json.Unmarshal([]byte(body), &st)
		if code != http.StatusBadRequest || st.reason() != "INVALID_PARAMS" || !strings.Contains(st.Error.Message, tc.says) {
			t.Errorf("%s %s: %d %s; want 400 INVALID_PARAMS saying %s", tc.method, tc.path, code, body, tc.says)
		}
	}
	if _, body := call(http.MethodGet, "/tasks/a?tenant=demo&tenant=demo"); !strings.Contains(body, `"taskId":"a"`) {
		t.Errorf("GET /tasks/a with its tenant twice: %s; want the ErrorInfo naming task a, as its other query errors do", body)
	}
	// A route whose body is "*" reads no query: the tenant there is not
	// the call's.
	if code, body := call(http.MethodPost, "/tasks/a:cancel?tenant=echo&agent=demo"); strings.Contains(body, "names another agent pool") {
		t.Errorf("POST /tasks/a:cancel?tenant=echo&agent=demo: %d %s; want the query's tenant ignored", code, body)
	}
}

// listedIDs is the ids of the tasks of a ListTasks answer (or the one
// task of a GetTask answer), space-separated, in order.
func listedIDs(body string) string {
	var ids []string
	for rest := body; ; {
		_, after, ok := strings.Cut(rest, `"id":"`)
		if !ok {
			return strings.Join(ids, " ")
		}
		id, _, _ := strings.Cut(after, `"`)
		ids, rest = append(ids, id), after
	}
}

// TestRESTCancelBodyTenant: a2a.proto binds CancelTask to POST
// /tasks/{id}:cancel with body "*", so the gateway reads the request's
// tenant from the body ({"tenant":"echo"}); the `/{tenant}/…` route sets
// it from the path, over the body's. It is the call's pool, with the path
// tenant's rules; a tenant that is no string is InvalidParams naming it.
// The SDK's handler reads no cancel body: the tenant was ignored, and a
// cancel refused on JSON-RPC and gRPC (InvalidParams) was answered on
// HTTP+JSON (TestTenantOnEveryBinding).
func TestRESTCancelBodyTenant(t *testing.T) {
	fh := newFakeHost()
	lt := task("a", "c1", normalizer.ProtocolA2A, "2026-11-25T10:00:00Z")
	lt.Pool = "echo"
	fh.AddTask(key, lt)
	rest := Bindings(fh).REST
	post := func(path, body string) (int, restStatus) {
		r := httptest.NewRequest(http.MethodPost, Path+path, strings.NewReader(body))
		r.Header.Set("X-Api-Key", key)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		rest.ServeHTTP(w, r)
		var st restStatus
		_ = json.Unmarshal(w.Body.Bytes(), &st)
		return w.Code, st
	}
	for _, tc := range []struct{ path, body, says string }{
		{"/tasks/a:cancel", `{"tenant":"not a pool"}`, `"not a pool" is not a valid agent pool name`},
		{"/tasks/a:cancel?agent=demo", `{"tenant":"echo"}`, `tenant "echo" names another agent pool than this interface's ("demo")`},
		{"/tasks/a:cancel", `{"tenant":5}`, "tenant must be a string, not a number"},
	} {
		code, st := post(tc.path, tc.body)
		if code != http.StatusBadRequest || st.reason() != "INVALID_PARAMS" || !strings.Contains(st.Error.Message, tc.says) {
			t.Errorf("POST %s %s: %d %+v; want 400 INVALID_PARAMS saying %s", tc.path, tc.body, code, st.Error, tc.says)
		}
	}
	for _, tc := range []struct{ path, body string }{
		{"/tasks/a:cancel", `{"tenant":"echo"}`},
		{"/tasks/a:cancel", `{"tenant":""}`},
		{"/tasks/a:cancel", `{}`},
		{"/echo/tasks/a:cancel", `{"tenant":"not a pool"}`}, // the path's wins
	} {
		if code, st := post(tc.path, tc.body); st.reason() == "INVALID_PARAMS" {
			t.Errorf("POST %s %s: %d %+v; want the tenant taken", tc.path, tc.body, code, st.Error)
		}
	}
}
