package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// consoleErrorCode returns the code of an error body in the console's JSON
// shape, "" when the body is not one.
func consoleErrorCode(b []byte) string {
	code, _ := consoleError(b)
	return code
}

// TestConsoleUnauthenticatedHasChallenge: ingress/AUTH.md, Failures:
// "401 + WWW-Authenticate (… ApiKey realm="e2a", header="X-Api-Key" when
// apiKey is; egress's GET /v1/requests/{id}[/stream] sends the same …)",
// and RFC 9110 §15.5.2 (a 401 MUST carry WWW-Authenticate). The console's
// API, which takes "the same credential as the other endpoints", answers
// 401 with no challenge at all (Console.gate → apiError), so a client
// cannot learn which scheme to use, unlike on GET /v1/requests/{id}.
func TestConsoleUnauthenticatedHasChallenge(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true})
	resp, b := p.do(t, "GET", "/v1/requests/no-such-request", "")
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("egress GET without credential: %d WWW-Authenticate=%q %s (want 401 with a challenge)", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), b)
	}
	want := resp.Header.Get("WWW-Authenticate")
	for _, path := range []string{"/console/api/session", "/console/api/requests", "/console/api/requests/no-such-request",
		"/console/api/requests/no-such-request/stream", "/console/api/stats",
		"/console/api/request?id=..", "/console/api/request/stream?id=.."} {
		resp, b := p.do(t, "GET", path, "")
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET %s without credential: %d %s", path, resp.StatusCode, b)
		}
		if got := resp.Header.Get("WWW-Authenticate"); got == "" {
			t.Errorf("GET %s without credential: 401 with no WWW-Authenticate (egress's GET answers %q)", path, want)
		}
	}
}

// TestConsoleDisabledPrincipalIsForbiddenOnLogin: a disabled principal's
// key is "403 forbidden" (docs/protocols.md error table, ingress/AUTH.md),
// and the console's gate answers it so ({"code":"forbidden"}). Signing in
// with the same key (POST /console/api/login) answers 403 with the code
// "unauthenticated" (auth.go, login: apiError(w, st, "unauthenticated", …)
// whatever st is): the status and the code disagree, and the login page
// tells a disabled principal its key is wrong.
func TestConsoleDisabledPrincipalIsForbiddenOnLogin(t *testing.T) {
	const disabled = "ak_mallory_console_disabled_0123"
	_, nc := natstest.RunServer(t)
	a, err := ingress.NewAuth(&ingress.AuthConfig{APIKeys: []ingress.Credential{
		{Principal: "alice", Secret: keyAlice}, {Principal: "mallory", Secret: disabled, Disabled: true}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	con, err := console.New(ctx, nc, nil, console.WithAuth(authFunc(a)), console.WithChallenge(a.SetChallenge), console.WithoutIndexer())
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	srv := serveConsole(t, con)

	resp, b := testkit.Do(t, "GET", srv.URL+"/console/api/session", "", "X-Api-Key", disabled)
	if resp.StatusCode != http.StatusForbidden || consoleErrorCode(b) != "forbidden" {
		t.Fatalf("gate with a disabled key: %d %s (want 403 forbidden)", resp.StatusCode, b)
	}
	resp, b = testkit.Do(t, "POST", srv.URL+"/console/api/login", `{"scheme":"apiKey","secret":"`+disabled+`"}`,
		"X-E2A-Console", "1", "Content-Type", "application/json")
	if resp.StatusCode != http.StatusForbidden || consoleErrorCode(b) != "forbidden" {
		t.Errorf("login with a disabled key: %d %s, want 403 with code forbidden (the gate's answer to the same key)", resp.StatusCode, b)
	}
}

// TestConsoleAllowNamesHead: the console's GET APIs serve HEAD (the
// router's GET patterns match it: 200 with the headers), and egress's own
// GET routes say so in their 405 (Allow: GET, HEAD). The console's 405
// answers Allow: GET (console.go Register: egress.MethodNotAllowed(allow)
// with allow = http.MethodGet), advertising less than the resource
// supports (RFC 9110 §10.2.1).
func TestConsoleAllowNamesHead(t *testing.T) {
	p := startPipeline(t, pipelineOptions{noAgent: true})
	resp, _ := p.do(t, "DELETE", "/v1/requests/some-request", "")
	egressAllow := resp.Header.Get("Allow")
	for _, path := range []string{"/console/api/requests", "/console/api/session", "/console/api/stats", "/console/api/requests/some-request",
		"/console/api/request?id=some-request"} {
		if resp, b := p.do(t, "HEAD", path, ""); resp.StatusCode == http.StatusMethodNotAllowed {
			t.Fatalf("HEAD %s: %d %s", path, resp.StatusCode, b)
		}
		resp, b := p.do(t, "DELETE", path, "")
		allow := resp.Header.Get("Allow")
		if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(allow, "HEAD") {
			t.Errorf("DELETE %s: %d Allow=%q %s; HEAD is served there, and egress's GET routes answer Allow=%q",
				path, resp.StatusCode, allow, b, egressAllow)
		}
	}
}

// TestConsoleStreamErrorHasConsoleHeaders: every console answer carries
// the console's security headers (console.go securityHeaders: "set on
// every console answer": nosniff, no-referrer, DENY, Cache-Control
// no-store). GET /console/api/requests/{id}/stream is answered by egress's
// handler (streamRequest) and gets none of them: its 404 for an unknown
// or another principal's request is cacheable and sniffable, unlike every
// other /console/api answer.
func TestConsoleStreamErrorHasConsoleHeaders(t *testing.T) {
	p := startPipeline(t, pipelineOptions{noAgent: true})
	resp, b := p.do(t, "GET", "/console/api/requests/no-such-request/stream", "", "Accept", "text/event-stream")
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("stream of an unknown request: %d %s", resp.StatusCode, b)
	}
	for k, v := range map[string]string{"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store",
		"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("GET /console/api/requests/no-such-request/stream 404: %s=%q, want %q (set on every other console answer)", k, got, v)
		}
	}
}

// TestConsoleUnknownPageHasConsoleHeaders: a path under /console that names
// no page is 404 with the console's headers; it fell through to ingress's
// catch-all, which sets none of them (the console walk of 2026-12-03).
func TestConsoleUnknownPageHasConsoleHeaders(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true})
	for _, path := range []string{"/console/foo", "/console/index.html", "/console/a/b"} {
		resp, b := p.do(t, "GET", path, "", "X-Api-Key", keyAlice)
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("X-Content-Type-Options") != "nosniff" ||
			resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("Cache-Control") != "no-store" ||
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("GET %s: %d %v %s, want 404 with the console's headers", path, resp.StatusCode, resp.Header, b)
		}
	}
}

// TestConsoleUnknownAPIPathIsConsoleJSON: a path under /console/api that
// names no API (a typo, a path of another version of the page) is 404 in
// the console's JSON error shape with the console's headers (nosniff,
// no-store, the inert Content-Security-Policy), as every console answer
// is; it fell through to whatever else the mux held (ingress's catch-all
// without them, or net/http's plain-text 404).
func TestConsoleUnknownAPIPathIsConsoleJSON(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true})
	for _, path := range []string{"/console/api/nope", "/console/api/requests/a/b", "/console/api/"} {
		resp, b := p.do(t, "GET", path, "", "X-Api-Key", keyAlice)
		if resp.StatusCode != http.StatusNotFound || consoleErrorCode(b) != "not_found" ||
			resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cache-Control") != "no-store" ||
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("GET %s: %d %v %s, want the console's 404 not_found with its headers", path, resp.StatusCode, resp.Header, b)
		}
	}
}

// TestConsolePageWrongMethodIs405: a page of the console (the page, its
// login page, its assets) asked with another method than GET or HEAD is
// 405 with Allow: GET, HEAD and the console's headers, as its API paths
// are (TestConsoleAllowNamesHead): POST /console was redirected (307,
// the router's, keeping the method) to /console/, where it was 404 "no
// such console page", as was POST /console/, /console/login or an asset:
// a page that is there, said missing.
func TestConsolePageWrongMethodIs405(t *testing.T) {
	p := startPipeline(t, pipelineOptions{noAgent: true})
	for _, path := range []string{"/console", "/console/", "/console/login", "/console/assets/console.js"} {
		if resp, b := p.do(t, "GET", path, ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %.200s", path, resp.StatusCode, b)
		}
		for _, m := range []string{"POST", "DELETE", "OPTIONS"} {
			resp, b := p.do(t, m, path, "")
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" ||
				resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("%s %s: %d Allow %q %v %.200s, want 405 Allow: GET, HEAD with the console's headers",
					m, path, resp.StatusCode, resp.Header.Get("Allow"), resp.Header, b)
			}
		}
	}
	// A page that is not there stays 404 whatever the method.
	if resp, b := p.do(t, "POST", "/console/nope", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST /console/nope: %d %.200s, want 404", resp.StatusCode, b)
	}
}
