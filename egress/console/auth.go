package console

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/tenant"
)

// The browser cannot put X-Api-Key or Authorization on a page load or an
// EventSource, so a person signs in once with the same credential the other
// endpoints take: POST /console/api/login checks it with the AuthFunc and
// keeps it in an HttpOnly, SameSite=Strict cookie scoped to /console. Each
// console request turns the cookie back into the header, authenticates it
// like any request, and strips it before any handler runs. The server
// keeps no session state, so any egress replica serves any page. State
// changing calls also need the X-E2A-Console header, which a cross-site
// form cannot send.
const (
	// sessionMaxAge is how long the browser keeps the sign-in cookie: a
	// session cookie would live as long as the browser restores its
	// session, and it holds a credential. (The server keeps no state: the
	// credential itself stays valid until it is revoked.)
	sessionMaxAge = 12 * time.Hour

	cookieName   = "e2a_console"
	csrfHeader   = "X-E2A-Console"
	headerAPIKey = "X-Api-Key"
	// maxSecretLen is the longest secret the cookie holds: a browser
	// keeps a cookie of up to 4,096 bytes of name and value (RFC 6265
	// §6.1's minimum, and Chromium's and Firefox's limit), and drops a
	// longer one without a word. The value is "k." or "b." and the
	// secret in unpadded base64.
	maxSecretLen = (maxCookieLen - len(cookieName) - 2) * 3 / 4
	maxCookieLen = 4096
	// maxLoginBody bounds the body of a sign-in.
	maxLoginBody = 8 << 10
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

func (c credential) cookieValue() string {
	p := "k."
	if c.scheme == SchemeBearer {
		p = "b."
	}
	return p + base64.RawURLEncoding.EncodeToString([]byte(c.secret))
}

func credentialFromCookie(v string) (credential, bool) {
	scheme := ""
	switch {
	case strings.HasPrefix(v, "k."):
		scheme = SchemeAPIKey
	case strings.HasPrefix(v, "b."):
		scheme = SchemeBearer
	default:
		return credential{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(v[2:])
	if err != nil || len(b) == 0 || len(b) > maxSecretLen {
		return credential{}, false
	}
	return credential{scheme: scheme, secret: string(b)}, true
}

// stripCredentials removes every header that may carry a credential.
func stripCredentials(h http.Header) {
	for _, k := range []string{"Authorization", "Proxy-Authorization", headerAPIKey, "Cookie"} {
		h.Del(k)
	}
}

// authenticate checks the credential of r (its headers, else the console
// cookie) and removes it from r. Without an AuthFunc everyone is let in.
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
		if ck, err := r.Cookie(cookieName); err == nil {
			cred, _ = credentialFromCookie(ck.Value)
		}
	}
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
			" bytes, more than a browser's cookie holds, where the sign-in keeps it: send it in X-Api-Key or Authorization instead")
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
	r.Header.Set("Cookie", cookieName+"="+cred.cookieValue())
	got, st, err := c.authenticate(r)
	if err != nil {
		c.authError(w, st, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: cred.cookieValue(), Path: "/console",
		MaxAge: int(sessionMaxAge / time.Second), HttpOnly: true, Secure: secureRequest(r), SameSite: http.SameSiteStrictMode})
	writeJSON(w, http.StatusOK, map[string]any{"principal": got.principal.ID, "auth_required": true})
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(csrfHeader) == "" {
		apiError(w, http.StatusForbidden, "forbidden", "missing "+csrfHeader+" header")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/console", MaxAge: -1,
		HttpOnly: true, Secure: secureRequest(r), SameSite: http.SameSiteStrictMode})
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
