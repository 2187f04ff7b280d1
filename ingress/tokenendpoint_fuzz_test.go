package ingress_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/ingress"
)

const (
	fuzzClientID     = "svc"
	fuzzClientSecret = "cs_fuzz_SECRET_0123456789abcdef"
)

// fuzzTokenContentTypes are the Content-Types FuzzTokenEndpoint sends.
var fuzzTokenContentTypes = []string{"application/x-www-form-urlencoded", "application/json",
	"application/x-www-form-urlencoded; charset=utf-8", "", "text/plain", "multipart/form-data; boundary=x"}

// FuzzTokenEndpoint posts any body, with any Content-Type of a few and any
// Authorization, to the OAuth 2.0 token endpoint (POST /oauth/token, RFC
// 6749 client credentials). Properties: an answer is 200 or an RFC 6749
// §5.2 error object with a known code and a 4xx status (401 with
// WWW-Authenticate), always no-store and JSON; it never holds the client
// secret (but as the name of a repeated parameter); a 200 is given only to a request that carries the secret, and
// its access token authenticates as the client.
func FuzzTokenEndpoint(f *testing.F) {
	a, err := ingress.NewAuth(&ingress.AuthConfig{Schemes: []string{"oauth2"},
		OAuth2: ingress.OAuth2Config{SigningKey: "sk_fuzz_signing_0123456789abcdef0123456789abcdef",
			Clients: []ingress.OAuth2Client{{ClientID: fuzzClientID, ClientSecret: fuzzClientSecret}}}})
	if err != nil {
		f.Fatal(err)
	}
	h := a.TokenHandler()
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(fuzzClientID+":"+fuzzClientSecret))
	f.Add(uint8(0), "grant_type=client_credentials&client_id=svc&client_secret="+fuzzClientSecret, "")
	f.Add(uint8(0), "grant_type=client_credentials", basic)
	f.Add(uint8(1), `{"grant_type":"client_credentials","client_id":"svc","client_secret":"`+fuzzClientSecret+`"}`, "")
	f.Add(uint8(1), `{"grant_type":"client_credentials","scope":"a b"}`, basic)
	f.Add(uint8(0), "grant_type=client_credentials&client_id=svc&client_id=svc", basic)
	f.Add(uint8(2), "grant_type=password&username=a&password=b", "Basic !!")
	f.Add(uint8(1), `{"grant_type":1}`, "Bearer x")
	f.Add(uint8(0), "grant_type=client_credentials&client_secret=%zz", "")
	f.Fuzz(func(t *testing.T, ct uint8, body, authz string) {
		r := httptest.NewRequest(http.MethodPost, "/oauth/token", strings.NewReader(body))
		r.Header.Set("Content-Type", fuzzTokenContentTypes[int(ct)%len(fuzzTokenContentTypes)])
		if authz != "" {
			r.Header["Authorization"] = []string{authz}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		res := w.Result()
		got := w.Body.String()
		if res.Header.Get("Cache-Control") != "no-store" || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
			t.Fatalf("answer %d headers %v", res.StatusCode, res.Header)
		}
		if strings.Contains(got, fuzzClientSecret) && !strings.Contains(got, `"parameter \"`) { // a repeated parameter's name is quoted
			t.Fatalf("answer holds the client secret: %s", got)
		}
		if res.StatusCode != http.StatusOK {
			checkOAuthError(t, res, got)
			return
		}
		if !strings.Contains(body+authz, fuzzClientSecret) && !carriesSecret(body, authz) {
			t.Fatalf("a token for a request without the secret: body %q, Authorization %q", body, authz)
		}
		var tok ingress.TokenResponse
		if err := json.Unmarshal(w.Body.Bytes(), &tok); err != nil || tok.AccessToken == "" || tok.TokenType != "Bearer" {
			t.Fatalf("token answer %s: %v", got, err)
		}
		ar := httptest.NewRequest(http.MethodPost, "/v1/requests", nil)
		ar.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		if p, err := a.Authenticate(ar); err != nil || p.UserID != fuzzClientID {
			t.Fatalf("the token issued does not authenticate as %s: %+v %v", fuzzClientID, p, err)
		}
	})
}

// checkOAuthError checks an RFC 6749 §5.2 error answer.
func checkOAuthError(t *testing.T, res *http.Response, body string) {
	t.Helper()
	var e struct {
		Code string `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error answer %d is not JSON: %q", res.StatusCode, body)
	}
	switch e.Code {
	case "invalid_request", "invalid_client", "invalid_grant", "unauthorized_client", "unsupported_grant_type", "invalid_scope":
	default:
		t.Fatalf("error code %q (status %d) is none of RFC 6749 §5.2's: %s", e.Code, res.StatusCode, body)
	}
	if res.StatusCode < 400 || res.StatusCode > 499 {
		t.Fatalf("status %d for %s", res.StatusCode, body)
	}
	if (res.StatusCode == http.StatusUnauthorized) != (res.Header.Get("WWW-Authenticate") != "") {
		t.Fatalf("status %d with WWW-Authenticate %q", res.StatusCode, res.Header.Get("WWW-Authenticate"))
	}
}

// carriesSecret reports whether the secret is in the body or the Basic
// credentials once their encodings are undone (percent-encoding, JSON
// escapes, base64), read apart from the endpoint's own parsing.
func carriesSecret(body, authz string) bool {
	var m map[string]any
	if json.Unmarshal([]byte(body), &m) == nil {
		for _, v := range m {
			if s, ok := v.(string); ok && s == fuzzClientSecret {
				return true
			}
		}
	}
	if v, err := urlValues(body); err == nil && v == fuzzClientSecret {
		return true
	}
	if len(authz) > 6 && strings.EqualFold(authz[:6], "basic ") {
		if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(authz[6:])); err == nil {
			_, p, _ := strings.Cut(string(b), ":")
			if u, err := url.QueryUnescape(p); err == nil && u == fuzzClientSecret || p == fuzzClientSecret {
				return true
			}
		}
	}
	return false
}

// urlValues is the client_secret of a form body.
func urlValues(body string) (string, error) {
	for _, kv := range strings.Split(body, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if k, err := url.QueryUnescape(k); err == nil && k == "client_secret" {
			return url.QueryUnescape(v)
		}
	}
	return "", nil
}
