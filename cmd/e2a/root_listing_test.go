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
// listed.
func TestRootListsEveryFrontDoor(t *testing.T) {
	base := startDev(t, nil).base
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var root struct {
		Endpoints map[string]string `json:"endpoints"`
	}
	if err := json.Unmarshal(b, &root); err != nil || len(root.Endpoints) == 0 {
		t.Fatalf("GET /: %d %.400s (%v)", resp.StatusCode, b, err)
	}
	listed := map[string]bool{}
	for _, v := range root.Endpoints {
		for _, p := range regexp.MustCompile(`/[^\s,;()]*`).FindAllString(v, -1) {
			listed[p] = true
		}
	}
	for _, door := range []string{"/v1/requests", "/a2a", "/a2a/v1", "/a2a/v1/message:send", "/a2a/v1/message:stream",
		"/a2a/v1/tasks", "/acp", "/a2e", "/health", "/api/v1/capabilities", "/api/v1/workflows/execute",
		"/api/v1/rate-limit/status", "/.well-known/agent-card.json", "/metrics", "/readyz"} {
		if !listed[door] {
			t.Errorf("GET / does not list %s (README, Protocols)", door)
		}
	}
	if t.Failed() {
		t.Logf("GET /: %s", b)
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
			t.Errorf("GET / lists %s, which answers 404", p)
		}
	}
}
