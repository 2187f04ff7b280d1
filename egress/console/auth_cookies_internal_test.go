package console

import (
	"encoding/base64"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/tenant"
)

// signInCookies sets the sign-in cookies of cred as the sign-in answers
// them, and returns those the browser keeps (Max-Age > 0) and the names it
// is told to remove.
func signInCookies(t *testing.T, cred credential) (kept []*http.Cookie, removed []string) {
	t.Helper()
	w := httptest.NewRecorder()
	setSignInCookies(w, httptest.NewRequest("POST", "/console/api/login", nil), cred.cookieValues())
	for _, line := range w.Result().Header.Values("Set-Cookie") {
		if strings.Contains(line, `="`) {
			t.Errorf("a quoted cookie value (not what was asked for): %.80s", line)
		}
	}
	for _, ck := range w.Result().Cookies() {
		if ck.MaxAge > 0 {
			kept = append(kept, ck)
		} else {
			removed = append(removed, ck.Name)
		}
	}
	return kept, removed
}

// cookieRequest is a console request carrying cks (and others).
func cookieRequest(cks ...*http.Cookie) *http.Request {
	r := httptest.NewRequest("GET", "/console/api/session", nil)
	for _, ck := range cks {
		r.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	}
	return r
}

// TestSignInCookiesRoundTrip: a secret of up to maxSecretLen bytes is
// split over at most maxCookies cookies, each within a browser's 4,096
// bytes of name and value, the names beyond removed, and read back whole
// whatever the order and the other cookies sent: as it is when it is all
// cookie characters (a JWT), in base64url when not.
func TestSignInCookiesRoundTrip(t *testing.T) {
	jwtish := func(n int) string { // base64url segments and dots
		const unit = "eyJhbGciOiJSUzI1NiJ9.eyJncm91cHMiOlsiYSIsImIiXX0.c2ln-_"
		s := strings.Repeat(unit, n/len(unit)+1)
		return s[:n]
	}
	odd := func(n int) string { // characters a cookie does not carry as they are
		const unit = "k;y, \"q\"\\é\x01="
		s := strings.Repeat(unit, n/len(unit)+1)
		return s[:n]
	}
	for _, c := range []struct {
		secret string
		enc    byte
		n      int
	}{
		{"a.b.c", 'r', 1},
		{jwtish(cookieChunkLen - cookiePrefixLen), 'r', 1},
		{jwtish(cookieChunkLen - cookiePrefixLen + 1), 'r', 2},
		{jwtish(6 << 10), 'r', 2},
		{jwtish(8 << 10), 'r', 3},
		{jwtish(maxSecretLen), 'r', 4},
		{"k-1=;, x", 'e', 1},
		{odd(3056), 'e', 1}, // 4,075 characters of base64url
		{odd(3057), 'e', 2},
		{odd(6 << 10), 'e', 3},
		{odd(maxSecretLen), 'e', 4},
	} {
		for _, scheme := range []string{SchemeAPIKey, SchemeBearer} {
			cred := credential{scheme: scheme, secret: c.secret}
			kept, removed := signInCookies(t, cred)
			if len(kept) != c.n || len(kept)+len(removed) != maxCookies {
				t.Fatalf("a %s secret of %d bytes: %d cookies kept, %v removed; want %d kept, the other names removed",
					scheme, len(c.secret), len(kept), removed, c.n)
			}
			for i, ck := range kept {
				if ck.Name != cookieNameAt(i) || len(ck.Name)+len(ck.Value) > maxCookieLen {
					t.Fatalf("a secret of %d bytes: cookie %d is %s of %d bytes of name and value", len(c.secret), i, ck.Name, len(ck.Name)+len(ck.Value))
				}
			}
			if got := kept[0].Value[1]; got != c.enc {
				t.Errorf("a secret of %d bytes (%.12q…) kept in encoding %c, want %c", len(c.secret), c.secret, got, c.enc)
			}
			// The browser sends them in any order, beside other cookies.
			others := []*http.Cookie{{Name: "e2a_console_x", Value: "1"}, {Name: "theme", Value: "dark"}}
			rev := append([]*http.Cookie{others[0]}, kept...)
			for i, j := 1, len(rev)-1; i < j; i, j = i+1, j-1 {
				rev[i], rev[j] = rev[j], rev[i]
			}
			got, ok := credentialFromCookies(cookieRequest(append(rev, others[1])...))
			if !ok || got.scheme != scheme || got.secret != c.secret {
				t.Fatalf("a %s secret of %d bytes read back as %v %s %d bytes", scheme, len(c.secret), ok, got.scheme, len(got.secret))
			}
		}
	}
}

// TestSignInCookiesNotWhole: a set of sign-in cookies that is not whole
// (one missing, one more, a name twice, a value cut short or changed) is
// no credential, never a part of one.
func TestSignInCookiesNotWhole(t *testing.T) {
	secret := strings.Repeat("eyJzdWIiOiJjYXJvbCJ9.", 500)[:9000] // three cookies, not base64url
	kept, _ := signInCookies(t, credential{scheme: SchemeBearer, secret: secret})
	if len(kept) != 3 {
		t.Fatalf("%d cookies", len(kept))
	}
	with := func(i int, v string) []*http.Cookie {
		out := append([]*http.Cookie(nil), kept...)
		out[i] = &http.Cookie{Name: kept[i].Name, Value: v}
		return out
	}
	head := kept[0].Value
	for what, cks := range map[string][]*http.Cookie{
		"no cookie":                           nil,
		"the head missing":                    kept[1:],
		"the middle one missing":              {kept[0], kept[2]},
		"the last one missing":                kept[:2],
		"one more":                            append(kept[:3:3], &http.Cookie{Name: cookieNameAt(3), Value: "x"}),
		"the head twice":                      append(kept[:3:3], kept[0]),
		"a chunk twice":                       append(kept[:3:3], kept[1]),
		"the last cut short":                  with(2, kept[2].Value[:len(kept[2].Value)-1]),
		"the last longer":                     with(2, kept[2].Value+"x"),
		"a middle one cut short":              with(1, kept[1].Value[:100]),
		"the head cut short":                  with(0, head[:len(head)-1]),
		"a length of 0":                       with(0, "br00000."+head[8:]),
		"a length with a sign":                with(0, "br+9000."+head[8:]),
		"a length not digits":                 with(0, "br0x9ff."+head[8:]),
		"a length of 5 cookies":               with(0, "br20000."+head[8:]),
		"another scheme":                      with(0, "xr"+head[2:]),
		"another encoding":                    with(0, "bx"+head[2:]),
		"base64 that is not":                  with(0, "be"+head[2:]),
		"no prefix":                           with(0, head[8:]),
		"an empty head":                       with(0, ""),
		"an earlier build's head with chunks": with(0, "b."+base64.RawURLEncoding.EncodeToString([]byte("tok"))),
		"an earlier build's head not base64":  {{Name: cookieName, Value: "k.!!!"}},
		"an earlier build's empty head":       {{Name: cookieName, Value: "k."}},
		"a head alone":                        {{Name: cookieName, Value: "k"}},
	} {
		if got, ok := credentialFromCookies(cookieRequest(cks...)); ok {
			t.Errorf("%s: read as a %s credential of %d bytes", what, got.scheme, len(got.secret))
		}
	}
	// A cookie of earlier builds, alone, is still read: a person signed in
	// before an upgrade stays so.
	v := "k." + base64.RawURLEncoding.EncodeToString([]byte("k-1=;, x"))
	if got, ok := credentialFromCookies(cookieRequest(&http.Cookie{Name: cookieName, Value: v})); !ok || got.scheme != SchemeAPIKey || got.secret != "k-1=;, x" {
		t.Errorf("an earlier build's cookie: %v %+v", ok, got)
	}
}

// FuzzSignInCookies: no Cookie header makes the reading panic, and what
// it reads is a secret within maxSecretLen of a known scheme.
func FuzzSignInCookies(f *testing.F) {
	var all []string
	for i, v := range (credential{scheme: SchemeBearer, secret: strings.Repeat("t", 5000)}).cookieValues() {
		all = append(all, cookieNameAt(i)+"="+v)
	}
	f.Add(strings.Join(all, "; "))
	f.Add("e2a_console=k.a2V5; e2a_console_1=x")
	f.Add("e2a_console=br00003.abc; e2a_console=br00003.abd")
	f.Add("e2a_console=be99999.")
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest("GET", "/console", nil)
		r.Header.Set("Cookie", header)
		got, ok := credentialFromCookies(r)
		if ok && (got.secret == "" || len(got.secret) > maxSecretLen || (got.scheme != SchemeAPIKey && got.scheme != SchemeBearer)) {
			t.Fatalf("%q read as %+v", header, got)
		}
	})
}

// TestSignInCookiesStripped: every sign-in cookie (and every other one)
// is removed from the request before the AuthFunc and any handler see it:
// the AuthFunc gets the secret whole in its credential header, once.
func TestSignInCookiesStripped(t *testing.T) {
	secret := strings.Repeat("eyJncm91cHMiOlsiYWRtaW4iXX0", 400)[:9000]
	kept, _ := signInCookies(t, credential{scheme: SchemeBearer, secret: secret})
	var authSaw http.Header
	c := &Console{o: options{log: slog.New(slog.DiscardHandler), auth: func(r *http.Request) (tenant.Principal, int, error) {
		authSaw = r.Header.Clone()
		return tenant.Principal{ID: "carol"}, 0, nil
	}}}
	var handlerSaw *http.Request
	h := c.gate(func(w http.ResponseWriter, r *http.Request) { handlerSaw = r })
	r := cookieRequest(append(kept, &http.Cookie{Name: "theme", Value: "dark"})...)
	h(httptest.NewRecorder(), r)
	if handlerSaw == nil {
		t.Fatal("the handler was not called")
	}
	if got := authSaw.Values("Authorization"); len(got) != 1 || got[0] != "Bearer "+secret || authSaw.Get("Cookie") != "" {
		t.Errorf("the AuthFunc saw Authorization of %d values, Cookie %.40q", len(got), authSaw.Get("Cookie"))
	}
	if len(handlerSaw.Header.Values("Cookie")) != 0 || len(handlerSaw.Cookies()) != 0 {
		t.Errorf("the handler's request still has cookies: %.80q", handlerSaw.Header.Values("Cookie"))
	}
	for k, vs := range handlerSaw.Header {
		for _, v := range vs {
			if strings.Contains(v, secret[:64]) {
				t.Errorf("the handler's request carries the secret in %s", k)
			}
		}
	}
}
