package console_test

import (
	"net/http"
	"testing"
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
