package main

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestRootListsEveryFrontDoor: `GET /` answers a client that is not a
// browser the list of endpoints, pointing to the README for the rest. It
// left out A2A v1.0 (`POST /a2a/v1` and its HTTP+JSON binding, the one
// today's official SDKs speak) and the A2E workflow API's `/health`,
// `/api/v1/capabilities` and `/api/v1/rate-limit/status`, all in the
// README's Protocols table and served on the same listener. Every path it
// lists is served (anything but 404), and each of those front doors is
// listed. Under a pool's prefix (`GET /pools/demo/`) it listed the bare
// paths, which reach the default pool: there the front doors listed are the
// pool's, under its prefix.
func TestRootListsEveryFrontDoor(t *testing.T) {
	base := startDev(t, nil).base
	listed := rootListing(t, base, "/")
	for _, door := range []string{"/v1/requests", "/a2a", "/a2a/v1", "/a2a/v1/message:send", "/a2a/v1/message:stream",
		"/a2a/v1/tasks", "/acp", "/a2e", "/health", "/api/v1/capabilities", "/api/v1/workflows/execute",
		"/api/v1/rate-limit/status", "/.well-known/agent-card.json", "/metrics", "/readyz"} {
		if !listed[door] {
			t.Errorf("GET / does not list %s (README, Protocols)", door)
		}
	}
	pool := rootListing(t, base, "/pools/demo/")
	for _, door := range []string{"/v1/requests", "/a2a", "/a2a/v1", "/a2a/v1/message:send", "/acp", "/a2e", "/.well-known/agent-card.json"} {
		if !pool["/pools/demo"+door] || pool[door] {
			t.Errorf("GET /pools/demo/ does not list the pool's %s, under its prefix", door)
		}
	}
}

// rootListing is the set of paths the endpoint listing at base+path names,
// each checked to be served (anything but 404; a path with {…} is not
// requested).
func rootListing(t *testing.T, base, path string) map[string]bool {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var root struct {
		Endpoints map[string]string `json:"endpoints"`
	}
	if err := json.Unmarshal(b, &root); err != nil || len(root.Endpoints) == 0 {
		t.Fatalf("GET %s: %d %.400s (%v)", path, resp.StatusCode, b, err)
	}
	listed := map[string]bool{}
	for _, v := range root.Endpoints {
		for _, p := range regexp.MustCompile(`/[^\s,;()]*`).FindAllString(v, -1) {
			listed[p] = true
		}
	}
	for p := range listed {
		if strings.Contains(p, "{") {
			continue
		}
		r, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode == http.StatusNotFound {
			t.Errorf("GET %s lists %s, which answers 404", path, p)
		}
	}
	if t.Failed() {
		t.Logf("GET %s: %s", path, b)
	}
	return listed
}

// TestDevUncleanBindingPathJSON: e2a dev serves its routes through
// ingress.CleanPaths: an A2A v1.0 HTTP+JSON path with an empty segment is
// the binding's JSON 404, not http.ServeMux's 307 HTML redirect.
func TestDevUncleanBindingPathJSON(t *testing.T) {
	base := startDev(t, nil).base
	req, _ := http.NewRequest(http.MethodGet, base+"/a2a/v1/tasks//pushNotificationConfigs", nil)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), `"NOT_FOUND"`) {
		t.Errorf("GET /a2a/v1/tasks//pushNotificationConfigs: %d %.200s; want the binding's JSON 404", resp.StatusCode, b)
	}
}
