package console_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/ingress"
)

// fakeJWT is a JWT-shaped bearer token of n bytes (header, claims with
// many groups, signature; base64url and dots), as an OIDC provider issues
// with group or role claims.
func fakeJWT(n int) string {
	enc := base64.RawURLEncoding.EncodeToString
	head, sig := enc([]byte(`{"alg":"RS256","typ":"JWT","kid":"k1"}`)), enc([]byte(strings.Repeat("s", 256)))
	var claims strings.Builder
	claims.WriteString(`{"sub":"carol","groups":[`)
	for i := 0; claims.Len() < n; i++ {
		fmt.Fprintf(&claims, `"group-%08x-0000-4000-8000-000000000000",`, i)
	}
	return head + "." + enc([]byte(claims.String()))[:n-len(head)-len(sig)-2] + "." + sig
}

// TestConsoleLongBearerSignIn: a bearer token of 6 KB (an OIDC token with
// group claims) signs in to the console. The sign-in kept the credential
// in one cookie, which a browser holds up to 4,096 bytes, and refused a
// secret over 3,062 bytes 413: such a person could not sign in at all.
// The credential is split over cookies of the same attributes (HttpOnly,
// SameSite=Strict, Path=/console, Max-Age, Secure behind https), each
// within 4,096 bytes of name and value; they are read back on each
// request, a set that is not whole is no sign-in, and signing out
// removes them all.
func TestConsoleLongBearerSignIn(t *testing.T) {
	token := fakeJWT(6 << 10)
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true,
		bearers: []ingress.Credential{{Principal: "carol", Secret: token}}})
	for _, proto := range []string{"", "https"} {
		hdr := []string{"X-E2A-Console", "1", "Content-Type", "application/json"}
		if proto != "" {
			hdr = append(hdr, "X-Forwarded-Proto", proto)
		}
		resp, b := p.do(t, "POST", "/console/api/login", `{"scheme":"bearer","secret":"`+token+`"}`, hdr...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("sign-in with a bearer token of %d bytes: %d %s", len(token), resp.StatusCode, b)
		}
		var kept []*http.Cookie
		removed := map[string]bool{}
		for _, ck := range resp.Cookies() {
			if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console" || ck.Secure != (proto == "https") {
				t.Errorf("sign-in (X-Forwarded-Proto %q): cookie %s", proto, ck)
			}
			if len(ck.Name)+len(ck.Value) > 4096 {
				t.Errorf("cookie %s has %d bytes of name and value, more than a browser keeps", ck.Name, len(ck.Name)+len(ck.Value))
			}
			if ck.MaxAge > 0 {
				kept = append(kept, ck)
			} else {
				removed[ck.Name] = true
			}
		}
		if len(kept) != 2 || kept[0].Name != "e2a_console" || kept[1].Name != "e2a_console_1" ||
			!removed["e2a_console_2"] || !removed["e2a_console_3"] {
			t.Fatalf("sign-in's cookies: %v", resp.Header.Values("Set-Cookie"))
		}
		cookie := func(cks ...*http.Cookie) string {
			var s []string
			for _, ck := range cks {
				s = append(s, ck.Name+"="+ck.Value)
			}
			return strings.Join(s, "; ")
		}
		resp, b = p.do(t, "GET", "/console/api/session", "", "Cookie", cookie(kept[1], kept[0]))
		if resp.StatusCode != http.StatusOK || decode[map[string]any](t, b)["principal"] != "carol" {
			t.Fatalf("session with the cookies: %d %s", resp.StatusCode, b)
		}
		if resp, b := p.do(t, "GET", "/console", "", "Cookie", cookie(kept...)); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "console.js") {
			t.Fatalf("page with the cookies: %d", resp.StatusCode)
		}
		for what, c := range map[string]string{
			"the head alone":   cookie(kept[0]),
			"the second alone": cookie(kept[1]),
			"one more":         cookie(kept...) + "; e2a_console_2=" + kept[1].Value,
			"the second twice": cookie(kept...) + "; " + cookie(kept[1]),
			"the second short": cookie(kept[0]) + "; e2a_console_1=" + kept[1].Value[1:],
		} {
			if resp, b := p.do(t, "GET", "/console/api/session", "", "Cookie", c); resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(b), "carol") {
				t.Errorf("session with %s: %d %s, want 401 (not signed in)", what, resp.StatusCode, b)
			}
		}
		resp, b = p.do(t, "POST", "/console/api/logout", `{}`, append(hdr, "Cookie", cookie(kept...))...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("sign-out: %d %s", resp.StatusCode, b)
		}
		out := map[string]bool{}
		for _, ck := range resp.Cookies() {
			if ck.Value != "" || ck.MaxAge >= 0 || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console" {
				t.Errorf("sign-out: cookie %s, want it removed", ck)
			}
			out[ck.Name] = true
		}
		if len(out) != 4 || !out["e2a_console"] || !out["e2a_console_1"] || !out["e2a_console_2"] || !out["e2a_console_3"] {
			t.Errorf("sign-out removes %v, want e2a_console and e2a_console_1 to _3", resp.Header.Values("Set-Cookie"))
		}
	}
}
