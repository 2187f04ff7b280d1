package ingress_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestErrorShapes: every error of the E2A HTTP surface is
// {"error":{"code","message","retryable"}}, 404s are worded one way, a
// wrong method is a JSON 405 with Allow, and GET / says where to go.
func TestErrorShapes(t *testing.T) {
	p := startPipeline(t)
	type errBody struct {
		Error struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			Retryable *bool  `json:"retryable"`
		} `json:"error"`
	}
	check := func(name string, resp *http.Response, status int, code, allow string) {
		t.Helper()
		b, _ := io.ReadAll(resp.Body)
		var e errBody
		if resp.StatusCode != status || json.Unmarshal(b, &e) != nil || e.Error.Code != code || e.Error.Retryable == nil ||
			*e.Error.Retryable || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || resp.Header.Get("Allow") != allow {
			t.Errorf("%s: %d %q Allow %q: %s", name, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Allow"), b)
		}
		if code == "not_found" && e.Error.Message != "request not found" {
			t.Errorf("%s: 404 worded %q", name, e.Error.Message)
		}
	}
	check("GET unknown request", p.get(t, "/v1/requests/nope-xyz"), 404, "not_found", "")
	check("GET unknown stream", p.get(t, "/v1/requests/nope-xyz/stream", "Accept", "text/event-stream"), 404, "not_found", "")
	check("GET unknown stream NDJSON", p.get(t, "/v1/requests/nope-xyz/stream", "Accept", "application/x-ndjson"), 404, "not_found", "")
	check("GET /v1/requests", p.get(t, "/v1/requests"), 405, "method_not_allowed", "POST")
	check("GET /a2a", p.get(t, "/a2a"), 405, "method_not_allowed", "POST")
	for _, m := range []string{"POST", "DELETE", "PUT"} {
		req, _ := http.NewRequest(m, p.url+"/v1/requests/some-id", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		check(m+" /v1/requests/{id}", resp, 405, "method_not_allowed", "GET, HEAD")
		resp.Body.Close()
	}
	resp := p.get(t, "/")
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"console":"/console"`) || !strings.Contains(string(b), "/v1/requests") {
		t.Errorf("GET /: %d %s", resp.StatusCode, b)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("GET", p.url+"/", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/console" {
		t.Errorf("GET / from a browser: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Other paths stay a plain 404.
	if resp := p.get(t, "/nope"); resp.StatusCode != 404 {
		t.Errorf("GET /nope: %d", resp.StatusCode)
	}
}
