package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestConsoleSecurityHeadersOnEveryAnswer: every console answer (the page,
// its script and style sheet, a missing asset, the APIs, their 401 and 405)
// is nosniff, cannot be framed, sends no referrer, and carries a
// Content-Security-Policy under which nothing it holds runs (the page's own
// scripts only); the API answers, which hold tenant data, are no-store.
// The assets were served by the file server alone, without any of them, and
// the 405s by egress's handler, without the console's headers.
func TestConsoleSecurityHeadersOnEveryAnswer(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true})
	for _, c := range []struct {
		method, path string
		api          bool
		hdr          []string
	}{
		{"GET", "/console", false, nil},
		{"GET", "/console/", false, []string{"X-Api-Key", keyAlice}},
		{"GET", "/console/login", false, nil},
		{"GET", "/console/assets/console.js", false, nil},
		{"GET", "/console/assets/login.js", false, nil},
		{"GET", "/console/assets/console.css", false, nil},
		{"GET", "/console/assets/no-such-file.js", false, nil},
		{"GET", "/console/api/session", true, nil},
		{"GET", "/console/api/session", true, []string{"X-Api-Key", keyAlice}},
		{"GET", "/console/api/requests", true, []string{"X-Api-Key", keyAlice}},
		{"DELETE", "/console/api/requests", true, []string{"X-Api-Key", keyAlice}},
		{"GET", "/console/api/login", true, nil},
		{"POST", "/console/api/login", true, []string{"X-E2A-Console", "1"}},
	} {
		resp, b := p.do(t, c.method, c.path, "", c.hdr...)
		h := resp.Header
		what := c.method + " " + c.path + " (" + resp.Status + ")"
		for k, v := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
			if got := h.Get(k); got != v {
				t.Errorf("%s: %s=%q, want %q", what, k, got, v)
			}
		}
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: Content-Security-Policy %q, want default-src 'none' and frame-ancestors 'none', nothing inline", what, csp)
		}
		if c.api && h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: Cache-Control=%q, want no-store: %s", what, h.Get("Cache-Control"), b)
		}
	}
}

// TestConsoleSessionCookie: the sign-in cookie is HttpOnly, SameSite=Strict,
// scoped to /console, Secure over TLS or behind a proxy that says so, and
// expires (a browser that restores its session keeps a session cookie, a
// credential, for good); signing out clears it with the same attributes.
func TestConsoleSessionCookie(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true})
	for _, proto := range []string{"", "https"} {
		hdr := []string{"X-E2A-Console", "1", "Content-Type", "application/json"}
		if proto != "" {
			hdr = append(hdr, "X-Forwarded-Proto", proto)
		}
		resp, b := p.do(t, "POST", "/console/api/login", `{"scheme":"apiKey","secret":"`+keyAlice+`"}`, hdr...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("login: %d %s", resp.StatusCode, b)
		}
		ck := sessionCookie(t, resp)
		if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console" || ck.Secure != (proto == "https") {
			t.Errorf("login (X-Forwarded-Proto %q): cookie %s", proto, ck)
		}
		if ck.MaxAge <= 0 || time.Duration(ck.MaxAge)*time.Second > 12*time.Hour {
			t.Errorf("login (X-Forwarded-Proto %q): cookie Max-Age %d s, want an expiry within 12 h: %s", proto, ck.MaxAge, ck)
		}
		resp, b = p.do(t, "POST", "/console/api/logout", `{}`, hdr...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("logout: %d %s", resp.StatusCode, b)
		}
		out := sessionCookie(t, resp)
		if out.Value != "" || out.MaxAge >= 0 || !out.HttpOnly || out.SameSite != http.SameSiteStrictMode || out.Path != "/console" {
			t.Errorf("logout: cookie %s, want it cleared", out)
		}
	}
}

// TestConsolePostsNeedTheConsoleHeader: every state-changing console call
// (sign in, sign out, demo request) is refused without X-E2A-Console, which
// a cross-site form cannot send, even with a valid credential.
func TestConsolePostsNeedTheConsoleHeader(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true})
	for path, body := range map[string]string{
		"/console/api/login":  `{"scheme":"apiKey","secret":"` + keyAlice + `"}`,
		"/console/api/logout": `{}`,
		"/console/api/demo":   `{"text":"csrf"}`,
	} {
		resp, b := p.do(t, "POST", path, body, "Content-Type", "text/plain", "X-Api-Key", keyAlice)
		if resp.StatusCode != http.StatusForbidden || consoleErrorCode(b) != "forbidden" {
			t.Errorf("POST %s without X-E2A-Console: %d %s, want 403 forbidden", path, resp.StatusCode, b)
		}
		if len(resp.Cookies()) != 0 {
			t.Errorf("POST %s without X-E2A-Console set cookies %v", path, resp.Cookies())
		}
	}
}

// sessionCookie returns the console's cookie set by resp.
func sessionCookie(t *testing.T, resp *http.Response) *http.Cookie {
	t.Helper()
	for _, c := range resp.Cookies() {
		if c.Name == "e2a_console" {
			return c
		}
	}
	t.Fatalf("no e2a_console cookie in %v", resp.Header.Values("Set-Cookie"))
	return nil
}
