package console_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestBodyTooLarge: a sign-in whose secret is longer than the console
// keeps (then 4,096 bytes; TestBrowserLongSecretSignIn), in a body over its 32 KiB or not, and a demo text
// over the demo's 64 KiB body were answered 400 "body must be {…}" or
// "scheme must be … and the secret non-empty", as if the body were
// malformed. They are 413 body_too_large, saying what is too large; a
// body that is not the JSON asked for stays 400.
func TestBodyTooLarge(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true})
	login := func(secret string) string {
		return `{"scheme":"apiKey","secret":` + strconv.Quote(secret) + `}`
	}
	for _, c := range []struct {
		what, path, body string
		hdr              []string
		status           int
		code, says       string
	}{
		{"a secret over the body's 32 KiB", "/console/api/login", login(strings.Repeat("k", 33<<10)), nil, 413, "body_too_large", "larger than 32 KiB"},
		{"a secret over the cookies' 12,243 bytes", "/console/api/login", login(strings.Repeat("k", 12244)), nil, 413, "body_too_large", "secret is longer than 12243 bytes"},
		{"a malformed sign-in", "/console/api/login", `{"scheme":`, nil, 400, "bad_request", "body must be"},
		{"a demo text over 64 KiB", "/console/api/demo", `{"text":"` + strings.Repeat("d", 70<<10) + `"}`, []string{"X-Api-Key", keyAlice}, 413, "body_too_large", "larger than 64 KiB"},
		{"a malformed demo", "/console/api/demo", `{"text":`, []string{"X-Api-Key", keyAlice}, 400, "bad_request", "body must be"},
	} {
		resp, b := p.do(t, "POST", c.path, c.body, append([]string{"X-E2A-Console", "1", "Content-Type", "application/json"}, c.hdr...)...)
		code, msg := consoleError(b)
		if resp.StatusCode != c.status || code != c.code || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %d %s; want %d %s saying %q", c.what, resp.StatusCode, b, c.status, c.code, c.says)
		}
		if resp.StatusCode == http.StatusOK {
			t.Errorf("%s: accepted", c.what)
		}
	}
}
