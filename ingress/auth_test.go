package ingress

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/tenant"
)

const (
	testKeyAlice   = "ak_alice_0123456789abcdef"
	testKeyBob     = "ak_bob_fedcba9876543210xx"
	testTokenCI    = "bt_ci_00112233445566778899"
	testClientSec  = "cs_svc_a_secret_0123456789"
	testSigningKey = "sk_0123456789abcdef0123456789abcdef"
)

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

type authClock struct{ t time.Time }

func (c *authClock) now() time.Time { return c.t }

func newTestAuth(t *testing.T, mutate func(*AuthConfig), opts ...AuthOption) *Auth {
	t.Helper()
	cfg := AuthConfig{
		APIKeys: []Credential{
			{Principal: "alice", Secret: testKeyAlice},
			{Principal: "bob", SecretSHA256: sha(testKeyBob), IdentityOrigin: "agent"},
			{Principal: "mallory", Secret: "ak_mallory_disabled_000000", Disabled: true},
		},
		BearerTokens: []Credential{{Principal: "ci", Secret: testTokenCI}},
		OAuth2: OAuth2Config{
			SigningKey: testSigningKey,
			Clients: []OAuth2Client{
				{ClientID: "svc-a", ClientSecret: testClientSec, Scopes: []string{"agents", "admin"}},
				{ClientID: "svc-off", ClientSecretSHA256: sha("cs_off_secret_0123456789"), Disabled: true},
			},
		},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	a, err := NewAuth(&cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func authReq(h map[string]string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/a2a", nil)
	for k, v := range h {
		r.Header.Add(k, v)
	}
	return r
}

func TestAuthSchemes(t *testing.T) {
	clk := &authClock{t: time.Unix(1_700_000_000, 0)}
	var failures []string
	a := newTestAuth(t, nil, WithAuthClock(clk.now), WithAuthFailureHook(func(s, r string) { failures = append(failures, s+"|"+r) }))
	if got := strings.Join(a.Schemes(), ","); got != "apiKey,bearer,oauth2" {
		t.Fatalf("schemes %s", got)
	}
	tok, err := a.IssueToken("svc-a", testClientSec, "agents")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		h       map[string]string
		want    Principal
		wantErr error
	}{
		{"api key", map[string]string{"X-Api-Key": testKeyAlice}, Principal{UserID: "alice", IdentityOrigin: "user", Scheme: SchemeAPIKey}, nil},
		{"api key by digest", map[string]string{"x-api-key": testKeyBob}, Principal{UserID: "bob", IdentityOrigin: "agent", Scheme: SchemeAPIKey}, nil},
		{"static bearer", map[string]string{"Authorization": "Bearer " + testTokenCI}, Principal{UserID: "ci", IdentityOrigin: "user", Scheme: SchemeBearer}, nil},
		{"bearer case", map[string]string{"Authorization": "bearer  " + testTokenCI}, Principal{UserID: "ci", IdentityOrigin: "user", Scheme: SchemeBearer}, nil},
		{"oauth2 token", map[string]string{"Authorization": "Bearer " + tok.AccessToken}, Principal{UserID: "svc-a", IdentityOrigin: "service", Scheme: SchemeOAuth2}, nil},
		{"missing", nil, Principal{}, ErrUnauthenticated},
		{"wrong key", map[string]string{"X-Api-Key": testKeyAlice + "x"}, Principal{}, ErrUnauthenticated},
		{"disabled key", map[string]string{"X-Api-Key": "ak_mallory_disabled_000000"}, Principal{}, ErrForbidden},
		{"wrong bearer", map[string]string{"Authorization": "Bearer nope-nope-nope"}, Principal{}, ErrUnauthenticated},
		{"basic", map[string]string{"Authorization": "Basic YTpi"}, Principal{}, ErrUnauthenticated},
		{"empty bearer", map[string]string{"Authorization": "Bearer "}, Principal{}, ErrUnauthenticated},
		{"two credentials", map[string]string{"X-Api-Key": testKeyAlice, "Authorization": "Bearer " + testTokenCI}, Principal{}, ErrUnauthenticated},
		{"api key as bearer", map[string]string{"Authorization": "Bearer " + testKeyAlice}, Principal{}, ErrUnauthenticated},
		{"bearer as api key", map[string]string{"X-Api-Key": testTokenCI}, Principal{}, ErrUnauthenticated},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.Authenticate(authReq(tc.h))
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(p, tc.want) {
				t.Fatalf("principal = %+v, want %+v", p, tc.want)
			}
			if err != nil {
				for _, v := range tc.h {
					if len(v) > 10 && strings.Contains(err.Error(), strings.TrimPrefix(strings.TrimPrefix(v, "Bearer "), "bearer  ")) {
						t.Fatalf("error reveals the credential: %v", err)
					}
				}
				wantStatus := map[error]int{ErrUnauthenticated: 401, ErrForbidden: 403}[tc.wantErr]
				if AuthStatus(err) != wantStatus {
					t.Fatalf("status %d", AuthStatus(err))
				}
			}
		})
	}
	for _, f := range failures {
		for _, s := range []string{testKeyAlice, testTokenCI, tok.AccessToken} {
			if strings.Contains(f, s) {
				t.Fatalf("failure hook got a credential: %s", f)
			}
		}
	}
	if len(failures) != 9 {
		t.Fatalf("failure hook called %d times: %v", len(failures), failures)
	}

	// Challenges.
	_, err = a.Authenticate(authReq(map[string]string{"Authorization": "Bearer a.b.c"}))
	h := http.Header{}
	a.SetChallenge(h, err)
	ch := h.Values("WWW-Authenticate")
	if len(ch) != 2 || !strings.HasPrefix(ch[0], `Bearer realm="e2a", error="invalid_token"`) || ch[1] != `ApiKey realm="e2a", header="X-Api-Key"` {
		t.Fatalf("challenges %q", ch)
	}
	h = http.Header{}
	a.SetChallenge(h, nil)
	if h.Get("WWW-Authenticate") != `Bearer realm="e2a"` {
		t.Fatalf("plain challenge %q", h.Values("WWW-Authenticate"))
	}
}

func TestAuthNoneScheme(t *testing.T) {
	a, err := NewAuth(&AuthConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Authenticate(authReq(nil))
	if err != nil || !reflect.DeepEqual(p, Principal{UserID: "anonymous", IdentityOrigin: "user", Scheme: SchemeNone, Open: true}) {
		t.Fatalf("anonymous: %+v %v", p, err)
	}
	// A credential where none is accepted is an error, not anonymous.
	if _, err := a.Authenticate(authReq(map[string]string{"X-Api-Key": testKeyAlice})); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("stray key: %v", err)
	}
	if d := a.SecuritySchemes(); d.SecuritySchemes != nil || d.Security != nil {
		t.Fatalf("none declares %+v", d)
	}
	if len(a.Challenges(nil)) != 0 {
		t.Fatal("challenge with none only")
	}

	// none + apiKey: optional auth.
	b := newTestAuth(t, func(c *AuthConfig) { c.Schemes = []string{"NONE", "apikey"}; c.AnonymousPrincipal = "guest" })
	if p, err := b.Authenticate(authReq(nil)); err != nil || p.UserID != "guest" {
		t.Fatalf("optional anonymous: %+v %v", p, err)
	}
	if p, err := b.Authenticate(authReq(map[string]string{"X-Api-Key": testKeyAlice})); err != nil || p.UserID != "alice" {
		t.Fatalf("optional key: %+v %v", p, err)
	}
	if _, err := b.Authenticate(authReq(map[string]string{"X-Api-Key": "wrong-wrong-wrong-wrong"})); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("optional wrong key: %v", err)
	}
	// Bearer tokens are configured but the scheme is not enabled.
	if _, err := b.Authenticate(authReq(map[string]string{"Authorization": "Bearer " + testTokenCI})); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("disabled scheme: %v", err)
	}
	d := b.SecuritySchemes()
	js, _ := json.Marshal(d)
	if string(js) != `{"securitySchemes":{"apiKey":{"type":"apiKey","description":"API key in the X-Api-Key header","in":"header","name":"X-Api-Key"}},"security":[{"apiKey":[]},{}]}` {
		t.Fatalf("declaration %s", js)
	}
}

func TestAuthSecuritySchemesCard(t *testing.T) {
	a := newTestAuth(t, func(c *AuthConfig) { c.OAuth2.RequiredScope = "agents" })
	d := a.SecuritySchemesFor("https://agents.example.com/")
	js, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	_ = json.Unmarshal(js, &got)
	want := `{"security":[{"apiKey":[]},{"bearer":[]},{"oauth2":["agents"]}],"securitySchemes":{"apiKey":{"description":"API key in the X-Api-Key header","in":"header","name":"X-Api-Key","type":"apiKey"},"bearer":{"description":"Static bearer token","scheme":"bearer","type":"http"},"oauth2":{"description":"OAuth 2.0 client credentials; send the access token as a bearer token","flows":{"clientCredentials":{"scopes":{"admin":"","agents":"required to call the agent"},"tokenUrl":"https://agents.example.com/oauth/token"}},"type":"oauth2"}}}`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Fatalf("card:\n%s\nwant\n%s", b, want)
	}
	av := a.AgentVaultAuthSchemes("https://agents.example.com")
	if len(av) != 3 || av[2].Scheme != "oauth2" || av[2].TokenURL != "https://agents.example.com/oauth/token" || strings.Join(av[2].Scopes, ",") != "admin,agents" {
		t.Fatalf("agentvault %+v", av)
	}
}

func TestAuthOAuth2Tokens(t *testing.T) {
	clk := &authClock{t: time.Unix(1_700_000_000, 0)}
	a := newTestAuth(t, func(c *AuthConfig) {
		c.OAuth2.RequiredScope = "agents"
		c.OAuth2.Audience = "e2a"
		c.OAuth2.TokenTTL = "10m"
	}, WithAuthClock(clk.now))
	bearer := func(tok string) (Principal, error) {
		return a.Authenticate(authReq(map[string]string{"Authorization": "Bearer " + tok}))
	}
	tok, err := a.IssueToken("svc-a", testClientSec, "")
	if err != nil {
		t.Fatal(err)
	}
	if tok.TokenType != "Bearer" || tok.ExpiresIn != 600 || tok.Scope != "agents admin" {
		t.Fatalf("token %+v", tok)
	}
	if p, err := bearer(tok.AccessToken); err != nil || p.UserID != "svc-a" {
		t.Fatalf("fresh token: %v", err)
	}
	// Expiry (30 s leeway).
	clk.t = clk.t.Add(10*time.Minute + 29*time.Second)
	if _, err := bearer(tok.AccessToken); err != nil {
		t.Fatalf("within leeway: %v", err)
	}
	clk.t = clk.t.Add(2 * time.Second)
	if _, err := bearer(tok.AccessToken); !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired: %v", err)
	}
	clk.t = time.Unix(1_700_000_000, 0)

	// Tampering: payload changed, signature kept.
	parts := strings.Split(tok.AccessToken, ".")
	claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
	forged := strings.Replace(string(claims), `"sub":"svc-a"`, `"sub":"root"`, 1)
	if _, err := bearer(parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(forged)) + "." + parts[2]); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("forged claims: %v", err)
	}
	// alg none.
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	if _, err := bearer(none + "." + parts[1] + "."); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("alg none: %v", err)
	}
	// Signed with another key / issuer / audience.
	other := newTestAuth(t, func(c *AuthConfig) {
		c.OAuth2.SigningKey = "base64:" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 40)))
		c.OAuth2.Audience = "e2a"
	}, WithAuthClock(clk.now))
	otok, _ := other.IssueToken("svc-a", testClientSec, "agents")
	if _, err := bearer(otok.AccessToken); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("foreign key: %v", err)
	}
	wrongIss := newTestAuth(t, func(c *AuthConfig) { c.OAuth2.Issuer = "someone-else"; c.OAuth2.Audience = "e2a" }, WithAuthClock(clk.now))
	wtok, _ := wrongIss.IssueToken("svc-a", testClientSec, "agents")
	if _, err := bearer(wtok.AccessToken); !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "issuer") {
		t.Fatalf("wrong issuer: %v", err)
	}
	wrongAud := newTestAuth(t, func(c *AuthConfig) { c.OAuth2.Audience = "elsewhere" }, WithAuthClock(clk.now))
	atok, _ := wrongAud.IssueToken("svc-a", testClientSec, "agents")
	if _, err := bearer(atok.AccessToken); !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "audience") {
		t.Fatalf("wrong audience: %v", err)
	}
	// Key rotation: old key kept as a verify key.
	rotated := newTestAuth(t, func(c *AuthConfig) {
		c.OAuth2.SigningKey = strings.Repeat("n", 32)
		c.OAuth2.VerifyKeys = []string{testSigningKey}
		c.OAuth2.Audience = "e2a"
		c.OAuth2.RequiredScope = "agents"
	}, WithAuthClock(clk.now))
	if _, err := rotated.Authenticate(authReq(map[string]string{"Authorization": "Bearer " + tok.AccessToken})); err != nil {
		t.Fatalf("rotation: %v", err)
	}
	// Missing scope: forbidden with insufficient_scope.
	stok, _ := a.IssueToken("svc-a", testClientSec, "admin")
	_, err = bearer(stok.AccessToken)
	if !errors.Is(err, ErrForbidden) {
		t.Fatalf("scope: %v", err)
	}
	if ch := a.Challenges(err); !strings.Contains(ch[0], `error="insufficient_scope"`) || !strings.Contains(ch[0], `scope="agents"`) {
		t.Fatalf("scope challenge %q", ch)
	}
	// Revocation by removing the client.
	revoked := newTestAuth(t, func(c *AuthConfig) {
		c.OAuth2.Clients = c.OAuth2.Clients[1:]
		c.OAuth2.Audience = "e2a"
	}, WithAuthClock(clk.now))
	if _, err := revoked.Authenticate(authReq(map[string]string{"Authorization": "Bearer " + tok.AccessToken})); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("removed client: %v", err)
	}

	// Issue errors.
	for _, tc := range []struct{ id, secret, scope, code string }{
		{"svc-a", "wrong-secret-000000000", "", "invalid_client"},
		{"nobody", testClientSec, "", "invalid_client"},
		{"svc-off", "cs_off_secret_0123456789", "", "unauthorized_client"},
		{"svc-a", testClientSec, "agents root", "invalid_scope"},
	} {
		_, err := a.IssueToken(tc.id, tc.secret, tc.scope)
		var oe *OAuthError
		if !errors.As(err, &oe) || oe.Code != tc.code {
			t.Fatalf("%+v: %v", tc, err)
		}
		if strings.Contains(err.Error(), tc.secret) {
			t.Fatal("secret in error")
		}
	}
}

func TestAuthTokenEndpoint(t *testing.T) {
	a := newTestAuth(t, nil)
	mux := http.NewServeMux()
	mux.Handle("POST /oauth/token", a.TokenHandler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	post := func(body, ctype string, basic []string) (int, map[string]any, http.Header) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/oauth/token", strings.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if basic != nil {
			req.SetBasicAuth(url.QueryEscape(basic[0]), url.QueryEscape(basic[1]))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m, resp.Header
	}
	form := "application/x-www-form-urlencoded"
	code, m, h := post("grant_type=client_credentials&client_id=svc-a&client_secret="+url.QueryEscape(testClientSec)+"&scope=agents", form, nil)
	if code != 200 || m["token_type"] != "Bearer" || m["scope"] != "agents" || m["expires_in"].(float64) != 3600 || h.Get("Cache-Control") != "no-store" {
		t.Fatalf("form: %d %v", code, m)
	}
	if p, err := a.Authenticate(authReq(map[string]string{"Authorization": "Bearer " + m["access_token"].(string)})); err != nil || p.UserID != "svc-a" {
		t.Fatalf("issued token: %v", err)
	}
	code, m, _ = post("grant_type=client_credentials", form, []string{"svc-a", testClientSec})
	if code != 200 || m["access_token"] == nil {
		t.Fatalf("basic: %d %v", code, m)
	}
	code, m, _ = post(`{"grant_type":"client_credentials","client_id":"svc-a","client_secret":"`+testClientSec+`"}`, "application/json", nil)
	if code != 200 {
		t.Fatalf("json: %d %v", code, m)
	}
	for _, tc := range []struct {
		body, ctype string
		basic       []string
		status      int
		code        string
	}{
		{"grant_type=client_credentials&client_id=svc-a&client_secret=wrong-wrong-wrong-x", form, nil, 401, "invalid_client"},
		{"grant_type=client_credentials", form, []string{"svc-a", "wrong-wrong-wrong-x"}, 401, "invalid_client"},
		{"grant_type=client_credentials", form, nil, 401, "invalid_client"},
		{"grant_type=password&client_id=svc-a&client_secret=x", form, nil, 400, "unsupported_grant_type"},
		{"client_id=svc-a&client_secret=x", form, nil, 400, "invalid_request"},
		{"grant_type=client_credentials&client_secret=" + testClientSec, form, []string{"svc-a", testClientSec}, 400, "invalid_request"},
		{"grant_type=client_credentials&grant_type=client_credentials", form, nil, 400, "invalid_request"},
		{"grant_type=client_credentials", "text/plain", nil, 400, "invalid_request"},
		{"grant_type=client_credentials&client_id=svc-a&client_secret=" + url.QueryEscape(testClientSec) + "&scope=root", form, nil, 400, "invalid_scope"},
		{strings.Repeat("a", 20<<10), form, nil, 400, "invalid_request"},
	} {
		code, m, h := post(tc.body, tc.ctype, tc.basic)
		if code != tc.status || m["error"] != tc.code {
			t.Errorf("%.60q: %d %v, want %d %s", tc.body, code, m, tc.status, tc.code)
		}
		if code == 401 && h.Get("WWW-Authenticate") == "" {
			t.Errorf("401 without challenge")
		}
	}
	// GET is refused (also when mounted without a method pattern).
	rec := httptest.NewRecorder()
	a.TokenHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/oauth/token", nil))
	if rec.Code != 405 || rec.Header().Get("Allow") != "POST" {
		t.Fatalf("GET: %d", rec.Code)
	}
	// Secrets in the URL are refused.
	rec = httptest.NewRecorder()
	a.TokenHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/oauth/token?client_secret=x", strings.NewReader("")))
	if rec.Code != 400 {
		t.Fatalf("secret in URL: %d", rec.Code)
	}
}

func TestAuthConfigValidation(t *testing.T) {
	for name, cfg := range map[string]AuthConfig{
		"unknown scheme":      {Schemes: []string{"kerberos"}},
		"apiKey without keys": {Schemes: []string{"apiKey"}},
		"short key":           {APIKeys: []Credential{{Principal: "a", Secret: "short"}}},
		"bad digest":          {APIKeys: []Credential{{Principal: "a", SecretSHA256: "abc"}}},
		"both secret forms":   {APIKeys: []Credential{{Principal: "a", Secret: testKeyAlice, SecretSHA256: sha(testKeyAlice)}}},
		"no secret":           {APIKeys: []Credential{{Principal: "a"}}},
		"bad principal":       {APIKeys: []Credential{{Principal: "a:b", Secret: testKeyAlice}}},
		"empty principal":     {APIKeys: []Credential{{Secret: testKeyAlice}}},
		"bad origin":          {APIKeys: []Credential{{Principal: "a", Secret: testKeyAlice, IdentityOrigin: "robot"}}},
		"duplicate secret":    {APIKeys: []Credential{{Principal: "a", Secret: testKeyAlice}, {Principal: "b", SecretSHA256: sha(testKeyAlice)}}},
		"oauth2 no key":       {OAuth2: OAuth2Config{Clients: []OAuth2Client{{ClientID: "c", ClientSecret: testClientSec}}}},
		"oauth2 short key":    {OAuth2: OAuth2Config{SigningKey: "short", Clients: []OAuth2Client{{ClientID: "c", ClientSecret: testClientSec}}}},
		"oauth2 no clients":   {Schemes: []string{"oauth2"}, OAuth2: OAuth2Config{SigningKey: testSigningKey}},
		"oauth2 dup client":   {OAuth2: OAuth2Config{SigningKey: testSigningKey, Clients: []OAuth2Client{{ClientID: "c", ClientSecret: testClientSec}, {ClientID: "c", ClientSecret: testKeyAlice}}}},
		"oauth2 bad ttl":      {OAuth2: OAuth2Config{SigningKey: testSigningKey, TokenTTL: "1s", Clients: []OAuth2Client{{ClientID: "c", ClientSecret: testClientSec}}}},
		"none with creds":     {Schemes: []string{"none"}, APIKeys: []Credential{{Principal: "a", Secret: testKeyAlice}}},
		"bad realm":           {Realm: `a"b`},
		"unknown role":        {APIKeys: []Credential{{Principal: "a", Secret: testKeyAlice}}, Roles: map[string][]string{"a": {"root"}}},
		"role of a bad name":  {APIKeys: []Credential{{Principal: "a", Secret: testKeyAlice}}, Roles: map[string][]string{"a,b": {"audit"}}},
		"principal named like the anonymous one": {Schemes: []string{"none", "apiKey"},
			APIKeys: []Credential{{Principal: "anonymous", Secret: testKeyAlice}}},
		"anonymous with a role": {Schemes: []string{"none", "apiKey"}, APIKeys: []Credential{{Principal: "a", Secret: testKeyAlice}},
			Roles: map[string][]string{"anonymous": {"audit"}}},
	} {
		c := cfg
		if _, err := NewAuth(&c); !errors.Is(err, ErrAuthConfig) {
			t.Errorf("%s: err = %v", name, err)
		} else if strings.Contains(err.Error(), testKeyAlice) || strings.Contains(err.Error(), testClientSec) {
			t.Errorf("%s: error reveals a secret: %v", name, err)
		}
	}
}

func TestAuthLoadFileAndEnv(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "auth.json")
	body := fmt.Sprintf(`{
	  "schemes": ["apiKey", "bearer", "oauth2"],
	  "realm": "pipeline",
	  "api_keys": [{"principal": "alice", "secret_sha256": %q}],
	  "bearer_tokens": [{"principal": "ci", "secret": %q}],
	  "oauth2": {"token_ttl": "15m", "clients": [{"client_id": "svc-a", "client_secret_sha256": %q, "scopes": ["agents"]}]}
	}`, sha(testKeyAlice), testTokenCI, sha(testClientSec))
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		EnvAuthFile:         file,
		EnvAPIKeys:          "bob:" + testKeyBob + ", carol:sha256:" + sha("ak_carol_0123456789abcdef"),
		EnvOAuth2SigningKey: testSigningKey,
		EnvOAuth2TokenURL:   "https://x.example/oauth/token",
	}
	a, err := LoadAuth(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	for key, who := range map[string]string{testKeyAlice: "alice", testKeyBob: "bob", "ak_carol_0123456789abcdef": "carol"} {
		if p, err := a.Authenticate(authReq(map[string]string{"X-Api-Key": key})); err != nil || p.UserID != who {
			t.Fatalf("%s: %+v %v", who, p, err)
		}
	}
	if a.Realm() != "pipeline" {
		t.Fatal(a.Realm())
	}
	tok, err := a.IssueToken("svc-a", testClientSec, "")
	if err != nil || tok.ExpiresIn != 900 {
		t.Fatalf("token %+v %v", tok, err)
	}
	if u := a.SecuritySchemes().SecuritySchemes["oauth2"].Flows.ClientCredentials.TokenURL; u != "https://x.example/oauth/token" {
		t.Fatal(u)
	}

	// Nothing in the Auth holds a clear-text credential.
	assertNoSecrets(t, reflect.ValueOf(a).Elem(), []string{testKeyAlice, testKeyBob, testTokenCI, testClientSec})
	for _, s := range []string{fmt.Sprint(a), fmt.Sprintf("%#v", a), fmt.Sprintf("%+v", a)} {
		if strings.Contains(s, testSigningKey) || strings.Contains(s, testTokenCI) {
			t.Fatalf("formatting reveals a secret: %s", s)
		}
	}

	// NewAuth clears the clear-text fields it was given.
	cfg := AuthConfig{APIKeys: []Credential{{Principal: "a", Secret: testKeyAlice}}}
	if _, err := NewAuth(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.APIKeys[0].Secret != "" {
		t.Fatal("config secret not cleared")
	}

	// Errors.
	env = map[string]string{EnvAPIKeys: "nocolon"}
	if _, err := LoadAuth(func(k string) string { return env[k] }); !errors.Is(err, ErrAuthConfig) {
		t.Fatalf("bad list: %v", err)
	}
	_ = os.WriteFile(file, []byte(`{"api_keys":[{"principal":"a","secret":"`+testKeyAlice+`","extra":1}]}`), 0o600)
	env = map[string]string{EnvAuthFile: file}
	if _, err := LoadAuth(func(k string) string { return env[k] }); !errors.Is(err, ErrAuthConfig) || strings.Contains(err.Error(), testKeyAlice) {
		t.Fatalf("unknown field: %v", err)
	}
	_ = os.WriteFile(file, []byte(`{"api_keys":[{"principal":"a","secret":"`+testKeyAlice+`"`), 0o600)
	if _, err := LoadAuth(func(k string) string { return env[k] }); !errors.Is(err, ErrAuthConfig) || strings.Contains(err.Error(), testKeyAlice) {
		t.Fatalf("syntax: %v", err)
	}
	env = map[string]string{EnvAuthFile: filepath.Join(dir, "missing.json")}
	if _, err := LoadAuth(func(k string) string { return env[k] }); !errors.Is(err, ErrAuthConfig) {
		t.Fatalf("missing file: %v", err)
	}
}

// assertNoSecrets walks v (no cycles in Auth) and fails if a string or byte
// slice equals or contains a secret.
func assertNoSecrets(t *testing.T, v reflect.Value, secrets []string) {
	t.Helper()
	check := func(s string) {
		for _, sec := range secrets {
			if strings.Contains(s, sec) {
				t.Fatalf("Auth holds a clear-text secret")
			}
		}
	}
	switch v.Kind() {
	case reflect.String:
		check(v.String())
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, v.Len())
			for i := range b {
				b[i] = byte(v.Index(i).Uint())
			}
			check(string(b))
			return
		}
		for i := 0; i < v.Len(); i++ {
			assertNoSecrets(t, v.Index(i), secrets)
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			assertNoSecrets(t, it.Key(), secrets)
			assertNoSecrets(t, it.Value(), secrets)
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			assertNoSecrets(t, v.Elem(), secrets)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			assertNoSecrets(t, v.Field(i), secrets)
		}
	}
}

// The declaration parses as an a2a-go agent card's security fields.
func TestAuthSecuritySchemesA2AGo(t *testing.T) {
	a := newTestAuth(t, func(c *AuthConfig) { c.Schemes = []string{"none", "apiKey", "bearer", "oauth2"} })
	d := a.SecuritySchemesFor("https://agents.example.com")
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var card a2a.AgentCard
	if err := json.Unmarshal(b, &card); err != nil {
		t.Fatalf("a2a-go cannot read %s: %v", b, err)
	}
	if len(card.SecuritySchemes) != 3 || len(card.Security) != 4 {
		t.Fatalf("card %+v", card)
	}
	ak, ok := card.SecuritySchemes["apiKey"].(a2a.APIKeySecurityScheme)
	if !ok || ak.Name != "X-Api-Key" || ak.In != a2a.APIKeySecuritySchemeInHeader {
		t.Fatalf("apiKey %#v", card.SecuritySchemes["apiKey"])
	}
	if h, ok := card.SecuritySchemes["bearer"].(a2a.HTTPAuthSecurityScheme); !ok || h.Scheme != "bearer" {
		t.Fatalf("bearer %#v", card.SecuritySchemes["bearer"])
	}
	o, ok := card.SecuritySchemes["oauth2"].(a2a.OAuth2SecurityScheme)
	if !ok || o.Flows.ClientCredentials == nil || o.Flows.ClientCredentials.TokenURL != "https://agents.example.com/oauth/token" {
		t.Fatalf("oauth2 %#v", card.SecuritySchemes["oauth2"])
	}
}

// TestAuthRoles: roles from the file and E2A_AUTH_ROLES reach the
// principal (never the anonymous one), and Tenant applies them.
func TestAuthRoles(t *testing.T) {
	env := map[string]string{
		EnvAuthSchemes: "none,apiKey",
		EnvAPIKeys:     "alice:" + testKeyAlice + ",ops:" + testKeyBob,
		EnvAuthRoles:   "ops:audit, ops:admin",
	}
	a, err := LoadAuth(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Tenant(authReq(map[string]string{"X-Api-Key": testKeyBob}))
	if err != nil || p.ID != "ops" || !p.HasRole(tenant.RoleAudit) || !p.HasRole(tenant.RoleAdmin) || p.Open {
		t.Fatalf("ops: %+v %v", p, err)
	}
	p, err = a.Tenant(authReq(map[string]string{"X-Api-Key": testKeyAlice}))
	if err != nil || p.ID != "alice" || len(p.Roles) != 0 || p.Allows(tenant.Read, "ops") {
		t.Fatalf("alice: %+v %v", p, err)
	}
	// Optional auth: the anonymous principal is not open (principals
	// exist), has no role, and owns only anonymous requests.
	p, err = a.Tenant(authReq(nil))
	if err != nil || p.ID != "anonymous" || p.Open || len(p.Roles) != 0 || p.Allows(tenant.Read, "alice") {
		t.Fatalf("anonymous: %+v %v", p, err)
	}
	if a.Open() {
		t.Fatal("optional auth reported open")
	}
	env[EnvAuthRoles] = "ops"
	if _, err := LoadAuth(func(k string) string { return env[k] }); !errors.Is(err, ErrAuthConfig) {
		t.Fatalf("role entry without a role: %v", err)
	}
}

// TestAgentCardAuthSchemes: the card carries the AgentVault profile's
// authSchemes derived from the configured auth (oauth2 with its tokenUrl),
// and none when ingress runs open.
func TestAgentCardAuthSchemes(t *testing.T) {
	a := newTestAuth(t, func(c *AuthConfig) { c.OAuth2.RequiredScope = "agents" })
	card := (&Server{opts: options{auth: a}}).AgentCard("https://agents.example.com")
	b, _ := json.Marshal(card["authSchemes"])
	want := `[{"scheme":"apiKey","description":"API key in the X-Api-Key header"},{"scheme":"bearer","description":"Authorization: Bearer \u003ctoken\u003e"},{"scheme":"oauth2","description":"OAuth 2.0 client credentials grant","tokenUrl":"https://agents.example.com/oauth/token","scopes":["admin","agents"]}]`
	if string(b) != want {
		t.Fatalf("authSchemes %s\nwant %s", b, want)
	}
	open := (&Server{}).AgentCard("http://localhost")
	if b, _ := json.Marshal(open["authSchemes"]); string(b) != `[{"scheme":"none","description":"No authentication"}]` {
		t.Fatalf("open authSchemes %s", b)
	}
}
