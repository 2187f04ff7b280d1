package console

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/tenant"
)

// The browser cannot put X-Api-Key or Authorization on a page load or an
// EventSource, so a person signs in once with the same credential the other
// endpoints take: POST /console/api/login checks it with the AuthFunc and
// keeps it in HttpOnly, SameSite=Strict cookies scoped to /console (one,
// or up to maxCookies for a long one: setSignInCookies). Each console
// request turns the cookies back into the header, authenticates it like
// any request, and strips them before any handler runs. The server keeps no
// session state, so any egress replica serves any page. State changing
// calls also need the X-E2A-Console header, which a cross-site form cannot
// send.
const (
	// sessionMaxAge is how long the browser keeps the sign-in cookies: a
	// session cookie would live as long as the browser restores its
	// session, and it holds a credential. (The server keeps no state: the
	// credential itself stays valid until it is revoked.)
	sessionMaxAge = 12 * time.Hour

	cookieName   = "e2a_console"
	csrfHeader   = "X-E2A-Console"
	headerAPIKey = "X-Api-Key"
	// maxCookieLen is what a browser keeps of a cookie's name and value
	// (RFC 6265 §6.1's minimum, and Chromium's and Firefox's limit): it
	// drops a longer cookie without a word.
	maxCookieLen = 4096
	// maxCookies bounds the cookies a sign-in's credential is split over:
	// e2a_console, e2a_console_1, …, e2a_console_3. Four hold a secret of
	// 12,243 bytes, which covers the bearer tokens OIDC providers issue
	// (3 to 8 KB with group or role claims: a JWT is kept as it is, in
	// two or three cookies) with room. The bound is what the browser sends with
	// every console request (the page, each list, each stream): a Cookie
	// header of up to 16.4 KB, where proxies commonly stop a request's
	// header (nginx at 8 KB a line by default, Node.js at 16 KB in all),
	// so more cookies would keep sign-ins that a front end then refuses;
	// and it bounds what the server reassembles.
	maxCookies = 4
	// cookieChunkLen is the length of the value of every cookie but the
	// last: what the longest name (e2a_console_3) leaves of maxCookieLen.
	cookieChunkLen = maxCookieLen - len(cookieName) - len("_3")
	// cookiePrefixLen is the length of the head's prefix: the scheme (k
	// or b), the encoding (r: the secret as it is, e: base64url), the
	// length of what follows in 5 digits, and a dot ("br06144.").
	cookiePrefixLen = 8
	// maxSecretLen is the longest secret a sign-in takes: what the
	// cookies hold of one in base64url (one that is all cookie
	// characters, as a JWT is, is kept as it is, in 3/4 of the room).
	maxSecretLen = (maxCookies*cookieChunkLen - cookiePrefixLen) * 3 / 4
	// maxLoginBody bounds the body of a sign-in: above maxSecretLen, so
	// that a secret too long is answered as such.
	maxLoginBody = 32 << 10
)

// Credential schemes a person can sign in with.
const (
	SchemeAPIKey = "apiKey"
	SchemeBearer = "bearer"
)

// credential is a presented credential and the principal it authenticated.
type credential struct {
	scheme, secret string
	principal      tenant.Principal
}

func (c credential) apply(h http.Header) {
	switch c.scheme {
	case SchemeAPIKey:
		h.Set(headerAPIKey, c.secret)
	case SchemeBearer:
		h.Set("Authorization", "Bearer "+c.secret)
	}
}

// cookieNameAt is the name of the i-th sign-in cookie: e2a_console, then
// e2a_console_1, e2a_console_2, ….
func cookieNameAt(i int) string {
	if i == 0 {
		return cookieName
	}
	return cookieName + "_" + strconv.Itoa(i)
}

// cookieIndex is the index of the sign-in cookie called name, or -1.
func cookieIndex(name string) int {
	for i := range maxCookies {
		if name == cookieNameAt(i) {
			return i
		}
	}
	return -1
}

// cookieOctets says whether s is all RFC 6265 cookie-octets (printable
// ASCII but space, DQUOTE, comma, semicolon and backslash), which a
// cookie carries as they are.
func cookieOctets(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b <= 0x20 || b >= 0x7f || b == '"' || b == ',' || b == ';' || b == '\\' {
			return false
		}
	}
	return true
}

// cookieValues returns the values of the sign-in's cookies, e2a_console's
// first: the prefix ("br06144.": scheme, encoding, length of the payload)
// and the payload, the secret as it is when it is all cookie-octets (a
// JWT is), else in unpadded base64url, cut into cookieChunkLen pieces.
// The secret is at most maxSecretLen bytes.
func (c credential) cookieValues() []string {
	scheme, enc, payload := "k", "r", c.secret
	if c.scheme == SchemeBearer {
		scheme = "b"
	}
	if !cookieOctets(payload) {
		enc, payload = "e", base64.RawURLEncoding.EncodeToString([]byte(c.secret))
	}
	v := fmt.Sprintf("%s%s%05d.%s", scheme, enc, len(payload), payload)
	var vals []string
	for len(v) > cookieChunkLen {
		vals = append(vals, v[:cookieChunkLen])
		v = v[cookieChunkLen:]
	}
	return append(vals, v)
}

// credentialFromCookies reassembles the credential of the sign-in cookies
// of r. A set that is not whole (a cookie missing, one more than the
// head's length needs, a name twice, a length that is not the payload's,
// a value that does not decode) is no credential: never part of a secret.
func credentialFromCookies(r *http.Request) (credential, bool) {
	var vals [maxCookies]string
	var seen [maxCookies]int
	for _, ck := range r.Cookies() {
		if i := cookieIndex(ck.Name); i >= 0 {
			vals[i], seen[i] = ck.Value, seen[i]+1
		}
	}
	head, payload, ok := joinCookies(vals, seen)
	if !ok {
		return credential{}, false
	}
	var cred credential
	switch head[0] {
	case 'k':
		cred.scheme = SchemeAPIKey
	case 'b':
		cred.scheme = SchemeBearer
	default:
		return credential{}, false
	}
	switch head[1] {
	case 'r':
		if !cookieOctets(payload) {
			return credential{}, false
		}
		cred.secret = payload
	case 'e':
		b, err := base64.RawURLEncoding.DecodeString(payload)
		if err != nil {
			return credential{}, false
		}
		cred.secret = string(b)
	default:
		return credential{}, false
	}
	if cred.secret == "" || len(cred.secret) > maxSecretLen {
		return credential{}, false
	}
	return cred, true
}

// joinCookies joins the values of the sign-in cookies (seen: how many of
// each name were sent), and returns the scheme and encoding ("be") and the
// payload, or false for a set that is not whole.
func joinCookies(vals [maxCookies]string, seen [maxCookies]int) (head, payload string, ok bool) {
	if seen[0] != 1 {
		return "", "", false
	}
	v := vals[0]
	if len(v) >= 2 && v[1] == '.' {
		// One cookie of earlier builds: "k." or "b." and base64url.
		return v[:1] + "e", v[2:], seen == [maxCookies]int{1}
	}
	if len(v) < cookiePrefixLen || v[cookiePrefixLen-1] != '.' || v[2] < '0' || v[2] > '9' {
		return "", "", false
	}
	size, err := strconv.Atoi(v[2 : cookiePrefixLen-1])
	n := (cookiePrefixLen + size + cookieChunkLen - 1) / cookieChunkLen
	if err != nil || size < 1 || n > maxCookies || (n > 1 && len(v) != cookieChunkLen) {
		return "", "", false
	}
	var b strings.Builder
	b.WriteString(v[cookiePrefixLen:])
	for i := 1; i < maxCookies; i++ {
		want := 0 // each cookie the length needs, once; no other
		if i < n {
			want = 1
		}
		if seen[i] != want || (i < n-1 && len(vals[i]) != cookieChunkLen) {
			return "", "", false
		}
		b.WriteString(vals[i]) // empty beyond n
	}
	return v[:2], b.String(), b.Len() == size
}

// setSignInCookies sets the sign-in cookies of r's answer to vals, and
// removes the other names up to maxCookies (those of a longer earlier
// sign-in): all of them for vals nil (signing out). Every cookie has the
// same attributes.
func setSignInCookies(w http.ResponseWriter, r *http.Request, vals []string) {
	for i := range maxCookies {
		ck := &http.Cookie{Name: cookieNameAt(i), Path: "/console", MaxAge: -1,
			HttpOnly: true, Secure: secureRequest(r), SameSite: http.SameSiteStrictMode}
		if i < len(vals) {
			ck.Value, ck.MaxAge = vals[i], int(sessionMaxAge/time.Second)
		}
		http.SetCookie(w, ck)
	}
}

// stripCredentials removes every header that may carry a credential.
func stripCredentials(h http.Header) {
	for _, k := range []string{"Authorization", "Proxy-Authorization", headerAPIKey, "Cookie"} {
		h.Del(k)
	}
}

// authenticate checks the credential of r (its headers, else the console's
// sign-in cookies) and removes it from r: the Cookie header goes whole,
// every sign-in cookie with it. Without an AuthFunc everyone is let in.
func (c *Console) authenticate(r *http.Request) (credential, int, error) {
	var cred credential
	switch {
	case r.Header.Get("Authorization") != "" || len(r.Header.Values(headerAPIKey))+len(r.Header.Values("Authorization")) > 1:
		// Both credential headers, every value, go to the AuthFunc, which
		// refuses two credentials as ingress does (the first API key was
		// taken, the Authorization header and any further X-Api-Key
		// dropped unseen).
		cred.scheme = "header"
	case r.Header.Get(headerAPIKey) != "":
		cred = credential{scheme: SchemeAPIKey, secret: r.Header.Get(headerAPIKey)}
	default:
		cred, _ = credentialFromCookies(r)
	}
	return c.authenticateAs(r, cred)
}

// authenticateAs checks cred, read from r (its scheme "header": r's
// credential headers, for the AuthFunc to read), and removes every
// credential from r.
func (c *Console) authenticateAs(r *http.Request, cred credential) (credential, int, error) {
	if c.o.auth == nil {
		stripCredentials(r.Header)
		return credential{principal: tenant.Principal{Open: true}}, 0, nil
	}
	// The AuthFunc sees the credential headers only, and X-Forwarded-For:
	// ingress's failure limiter reads the client address behind a trusted
	// proxy there (ingress.ClientAddress).
	areq := &http.Request{Method: r.Method, URL: r.URL, Host: r.Host, RemoteAddr: r.RemoteAddr, TLS: r.TLS,
		Header: http.Header{}, Proto: r.Proto, ProtoMajor: r.ProtoMajor, ProtoMinor: r.ProtoMinor}
	if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
		areq.Header["X-Forwarded-For"] = xff
	}
	areq = areq.WithContext(r.Context())
	if cred.scheme == "header" {
		for _, k := range []string{"Authorization", headerAPIKey} {
			if v := r.Header.Values(k); len(v) > 0 {
				areq.Header[k] = v
			}
		}
		// The scheme is case-insensitive (RFC 9110 §11.1), as ingress reads it.
		if scheme, s, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " "); ok && strings.EqualFold(scheme, "Bearer") {
			cred = credential{scheme: SchemeBearer, secret: strings.TrimSpace(s)}
		} else {
			cred = credential{}
		}
	} else {
		cred.apply(areq.Header)
	}
	stripCredentials(r.Header)
	p, st, err := c.o.auth(areq)
	if err != nil {
		if st == 0 {
			st = http.StatusUnauthorized
		}
		return credential{}, st, err
	}
	cred.principal = p
	return cred, 0, nil
}

// loginRequest is the body of POST /console/api/login.
type loginRequest struct {
	Scheme string `json:"scheme"`
	Secret string `json:"secret"`
}

func secureRequest(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(csrfHeader) == "" {
		apiError(w, http.StatusForbidden, "forbidden", "missing "+csrfHeader+" header")
		return
	}
	stripCredentials(r.Header)
	var lr loginRequest
	if !decodeBody(w, r, maxLoginBody, &lr, `{"scheme":"apiKey"|"bearer","secret":"…"}`) {
		return
	}
	lr.Secret = strings.TrimSpace(lr.Secret)
	if len(lr.Secret) > maxSecretLen {
		apiError(w, http.StatusRequestEntityTooLarge, codeBodyTooLarge, "the secret is longer than "+strconv.Itoa(maxSecretLen)+
			" bytes, the most the sign-in's "+strconv.Itoa(maxCookies)+" cookies hold (a browser keeps 4,096 bytes a cookie)"+
			": send it in X-Api-Key or Authorization instead")
		return
	}
	if (lr.Scheme != SchemeAPIKey && lr.Scheme != SchemeBearer) || lr.Secret == "" {
		apiError(w, http.StatusBadRequest, "bad_request", `scheme must be "apiKey" or "bearer" and the secret non-empty`)
		return
	}
	cred := credential{scheme: lr.Scheme, secret: lr.Secret}
	if c.o.auth == nil {
		writeJSON(w, http.StatusOK, map[string]any{"principal": "", "auth_required": false})
		return
	}
	got, st, err := c.authenticateAs(r, cred)
	if err != nil {
		c.authError(w, st, err)
		return
	}
	setSignInCookies(w, r, cred.cookieValues())
	writeJSON(w, http.StatusOK, map[string]any{"principal": got.principal.ID, "auth_required": true})
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(csrfHeader) == "" {
		apiError(w, http.StatusForbidden, "forbidden", "missing "+csrfHeader+" header")
		return
	}
	stripCredentials(r.Header)
	setSignInCookies(w, r, nil)
	writeJSON(w, http.StatusOK, map[string]any{"signed_out": true})
}

// codeBodyTooLarge is the error code of a body over its limit, as the
// E2A front door names it.
const codeBodyTooLarge = "body_too_large"

// decodeBody decodes the JSON body of r, of at most limit bytes, into v.
// It answers a larger body 413 body_too_large, saying so, and one that
// does not decode 400 bad_request naming shape, and then returns false.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any, shape string) bool {
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit)).Decode(v)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		apiError(w, http.StatusRequestEntityTooLarge, codeBodyTooLarge,
			"the body is larger than "+strconv.FormatInt(limit>>10, 10)+" KiB")
	case err != nil:
		apiError(w, http.StatusBadRequest, "bad_request", "body must be "+shape)
	default:
		return true
	}
	return false
}
