package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestConsoleTwoCredentialsRefused: a request carrying two credentials
// (X-Api-Key and Authorization) is refused by ingress and egress (401:
// which one names the caller is not to be guessed). The console took the
// API key and dropped the Authorization header unseen, so the same
// request was alice's there.
func TestConsoleTwoCredentialsRefused(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true})
	hdr := []string{"X-Api-Key", keyAlice, "Authorization", "Bearer " + keyBob}
	resp, b := p.do(t, "GET", "/v1/requests/no-such-request", "", hdr...)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("egress GET with two credentials: %d %s (want 401)", resp.StatusCode, b)
	}
	for _, path := range []string{"/console/api/session", "/console/api/requests"} {
		if resp, b := p.do(t, "GET", path, "", hdr...); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s with two credentials: %d %s, want 401 as egress answers", path, resp.StatusCode, b)
		}
	}
}

// TestConsoleTwoAPIKeysRefused: two X-Api-Key headers are two credentials
// too, refused by every console route as egress and ingress refuse them
// (401). The console took the first value and dropped the second unseen,
// so the same request was alice's or bob's by the headers' order, and a
// console call published (POST /console/api/demo) under it.
func TestConsoleTwoAPIKeysRefused(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true})
	do := func(method, path string, keys ...string) (int, string) {
		req, err := http.NewRequest(method, p.url+path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = http.Header{"X-Api-Key": keys, "X-E2A-Console": {"1"}, "Content-Type": {"application/json"}}
		resp, b := testkit.Send(t, req)
		return resp.StatusCode, string(b)
	}
	if st, b := do("GET", "/v1/requests/no-such-request", keyAlice, keyBob); st != http.StatusUnauthorized {
		t.Fatalf("egress GET with two API keys: %d %s (want 401)", st, b)
	}
	for _, keys := range [][]string{{keyAlice, keyBob}, {keyBob, keyAlice}, {keyAlice, "not-a-key-of-anyone-0123"}} {
		for _, c := range []struct{ method, path string }{
			{"GET", "/console/api/session"}, {"GET", "/console/api/requests"}, {"POST", "/console/api/demo"},
		} {
			if st, b := do(c.method, c.path, keys...); st != http.StatusUnauthorized {
				t.Errorf("%s %s with two API keys: %d %s, want 401 as egress answers", c.method, c.path, st, b)
			}
		}
	}
}
