package ingress_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/e2a-pipeline/pipeline/ingress"
)

// TestExtendedAgentCardChallenge: the anonymous caller's refusal of the
// extended card over HTTP (v1.0 JSON-RPC and HTTP+JSON, v0.3
// agent/getAuthenticatedExtendedCard) carries the WWW-Authenticate
// challenges of the auth gate's refusals (a wrong API key on the same
// endpoint), and an answered card none.
func TestExtendedAgentCardChallenge(t *testing.T) {
	p := startPipelineWith(t, ingress.WithAuth(optionalAliceAndBob(t)))
	v1Call := `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{}}`
	v03Call := `{"jsonrpc":"2.0","id":"c1","method":"agent/getAuthenticatedExtendedCard"}`
	json := []string{"Content-Type", "application/json", "A2A-Version", "1.0"}
	resp, _ := do(t, "POST", p.url+"/a2a/v1", v1Call, append(json, "X-Api-Key", "ak_wrong_0123456789abcdef")...)
	gate := resp.Header.Values("WWW-Authenticate")
	if len(gate) == 0 {
		t.Fatalf("the gate's refusal (%d) has no challenge", resp.StatusCode)
	}
	for _, c := range []struct {
		name, method, path, body string
		status                   int
	}{
		{"v1.0 JSON-RPC", "POST", "/a2a/v1", v1Call, http.StatusOK},
		{"v1.0 HTTP+JSON", "GET", "/a2a/v1/extendedAgentCard", "", http.StatusUnauthorized},
		{"v0.3", "POST", "/a2a", v03Call, http.StatusUnauthorized},
	} {
		resp, b := do(t, c.method, p.url+c.path, c.body, json...)
		if got := resp.Header.Values("WWW-Authenticate"); resp.StatusCode != c.status || !slices.Equal(got, gate) {
			t.Errorf("%s, anonymous: %d %q, want %d %q (%s)", c.name, resp.StatusCode, got, c.status, gate, b)
		}
		resp, b = do(t, c.method, p.url+c.path, c.body, append(json, "X-Api-Key", testKey)...)
		if got := resp.Header.Values("WWW-Authenticate"); resp.StatusCode != http.StatusOK || len(got) > 0 {
			t.Errorf("%s, alice: %d %q (%s)", c.name, resp.StatusCode, got, b)
		}
	}
}
