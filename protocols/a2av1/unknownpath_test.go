package a2av1_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestRESTUnknownPathJSON: a path under the HTTP+JSON binding that is none
// of its routes, at the root, under a pool's path or after a path tenant,
// is 404 NOT_FOUND, and a route asked with another method 405 with Allow,
// both in the binding's error shape ({"error":{"code","status","message"}})
// with the Content-Type of its other errors. The SDK's router answered
// them in text ("404 page not found").
func TestRESTUnknownPathJSON(t *testing.T) {
	p := echoPipeline(t)
	// The Content-Type of the binding's own errors: an unknown task's.
	status, hdr, body := rawCall(t, http.MethodGet, p.URL+"/a2a/v1/tasks/no-such-task", "", nil)
	if status != http.StatusNotFound {
		t.Fatalf("GET an unknown task: %d %s", status, body)
	}
	contentType := hdr.Get("Content-Type")
	for _, c := range []struct {
		method, path string
		status       int
		name, allow  string
	}{
		{http.MethodGet, "/a2a/v1/foo", http.StatusNotFound, "NOT_FOUND", ""},
		{http.MethodPost, "/a2a/v1/message:foo", http.StatusNotFound, "NOT_FOUND", ""},
		{http.MethodGet, "/a2a/v1/tasks/x/y", http.StatusNotFound, "NOT_FOUND", ""},
		{http.MethodGet, "/a2a/v1/", http.StatusNotFound, "NOT_FOUND", ""},
		{http.MethodGet, "/a2a/v1/.well-known/agent.json", http.StatusNotFound, "NOT_FOUND", ""},
		{http.MethodGet, "/pools/demo/a2a/v1/foo", http.StatusNotFound, "NOT_FOUND", ""},
		{http.MethodGet, "/a2a/v1/demo/tasks/x/y", http.StatusNotFound, "NOT_FOUND", ""},
		{http.MethodGet, "/a2a/v1/message:send", http.StatusMethodNotAllowed, "UNIMPLEMENTED", "POST"},
		{http.MethodDelete, "/pools/demo/a2a/v1/tasks", http.StatusMethodNotAllowed, "UNIMPLEMENTED", "GET"},
		{http.MethodPut, "/a2a/v1/demo/message:stream", http.StatusMethodNotAllowed, "UNIMPLEMENTED", "POST"},
		// A task's path without a method (:cancel, :subscribe) is GetTask's
		// alone: POST was answered 400 "invalid request", and DELETE's
		// Allow listed POST (TestRESTTaskPathAllowsGetOnly).
		{http.MethodPost, "/a2a/v1/tasks/x", http.StatusMethodNotAllowed, "UNIMPLEMENTED", "GET"},
		{http.MethodPost, "/a2a/v1/demo/tasks/x", http.StatusMethodNotAllowed, "UNIMPLEMENTED", "GET"},
	} {
		status, hdr, body := rawCall(t, c.method, p.URL+c.path, "", nil)
		var got struct {
			Error struct {
				Code    int    `json:"code"`
				Status  string `json:"status"`
				Message string `json:"message"`
			} `json:"error"`
		}
		err := json.Unmarshal([]byte(body), &got)
		if status != c.status || err != nil || got.Error.Code != c.status || got.Error.Status != c.name || got.Error.Message == "" {
			t.Errorf("%s %s: %d %q, want %d with {\"error\":{\"code\":%d,\"status\":%q,\"message\":…}}",
				c.method, c.path, status, body, c.status, c.status, c.name)
		}
		if ct := hdr.Get("Content-Type"); ct != contentType {
			t.Errorf("%s %s: Content-Type %q, want the binding's %q", c.method, c.path, ct, contentType)
		}
		if a := hdr.Get("Allow"); c.allow != "" && !containsMethod(a, c.allow) {
			t.Errorf("%s %s: Allow %q, want it to list %s", c.method, c.path, a, c.allow)
		}
	}
}

// containsMethod reports whether allow, an Allow header, lists method.
func containsMethod(allow, method string) bool {
	for m := range strings.SplitSeq(allow, ",") {
		if strings.TrimSpace(m) == method {
			return true
		}
	}
	return false
}

// TestRESTTaskPathAllowsGetOnly: /tasks/{id}, naming no method, is
// GetTask's path alone, so another method than GET or HEAD is 405 with
// Allow: GET, HEAD; the SDK's router answered POST 400 "invalid request"
// and DELETE or PUT 405 with an Allow listing POST, the method it then
// refused. /tasks/{id}:cancel still takes POST.
func TestRESTTaskPathAllowsGetOnly(t *testing.T) {
	p := echoPipeline(t)
	for _, m := range []string{http.MethodPost, http.MethodDelete, http.MethodPut} {
		for _, path := range []string{"/a2a/v1/tasks/x", "/a2a/v1/demo/tasks/x", "/pools/demo/a2a/v1/tasks/x"} {
			status, hdr, body := rawCall(t, m, p.URL+path, "{}", nil)
			if status != http.StatusMethodNotAllowed || hdr.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d (Allow %q) %s; want 405 with Allow: GET, HEAD", m, path, status, hdr.Get("Allow"), body)
			}
		}
	}
	if status, _, body := rawCall(t, http.MethodPost, p.URL+"/a2a/v1/tasks/x:cancel", "{}", nil); status != http.StatusNotFound {
		t.Errorf("POST /tasks/x:cancel: %d %s; want 404 (CancelTask of an unknown task)", status, body)
	}
}
