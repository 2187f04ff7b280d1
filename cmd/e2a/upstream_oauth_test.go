package main

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/e2a-pipeline/pipeline/bridge"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/oauthtest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestUpstreamOAuth: an HTTP agent that takes only bearer tokens its
// authorization server (go-oauth2's) issued answers `e2a dev --http …`
// whose E2A_UPSTREAM_OAUTH_* variables name that server's token endpoint
// and the client, the secret in no output. A refused client ends the
// bridge's start at once (exit 1) naming the variables, not the secret; a
// token endpoint that is down ends it retryable, as an upstream down
// does, one that redirects is not followed (the secret stays where it was
// sent); the variables are refused when one of the three is missing, with
// an API key, or with a token endpoint over http to another machine.
func TestUpstreamOAuth(t *testing.T) {
	const secret = "oauth-client-secret-4d2b"
	as := oauthtest.Start(t, "e2a-pool", secret, time.Hour)
	agent := httptest.NewServer(as.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "answered with a token")
	})))
	t.Cleanup(agent.Close)
	env := func(id, secret string, more ...string) []string {
		return append([]string{"E2A_UPSTREAM_OAUTH_TOKEN_URL=" + as.TokenURL(), "E2A_UPSTREAM_OAUTH_CLIENT_ID=" + id,
			"E2A_UPSTREAM_OAUTH_CLIENT_SECRET=" + secret, "E2A_UPSTREAM_OAUTH_SCOPES=agents"}, more...)
	}

	dev := startDev(t, env("e2a-pool", secret), "--http", agent.URL+"/")
	waitPoolLive(t, dev.base, "agent")
	if _, b := testkit.Do(t, "POST", dev.base+"/v1/requests?wait=true", `{"params":{"text":"hi"}}`); !strings.Contains(string(b), "answered with a token") {
		t.Errorf("through the agent: %.500s", b)
	}

	down := oauthtest.Start(t, "e2a-pool", secret, time.Hour)
	down.SetDown(true)
	// A token endpoint that redirects: the secret is not sent on.
	redirect := httptest.NewServer(http.RedirectHandler(as.TokenURL(), http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	issued := as.Issued()
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"a refused client", env("e2a-pool", "not-the-secret-31"), "no token for the http upstream"},
		{"a token endpoint down", append(env("e2a-pool", secret), "E2A_UPSTREAM_OAUTH_TOKEN_URL="+down.TokenURL()), "answered 503 (Service Unavailable)"},
		{"a redirect", append(env("e2a-pool", secret), "E2A_UPSTREAM_OAUTH_TOKEN_URL="+redirect.URL+"/token"), "answered 307"},
		{"no secret", env("e2a-pool", ""), "E2A_UPSTREAM_OAUTH_TOKEN_URL, E2A_UPSTREAM_OAUTH_CLIENT_ID and E2A_UPSTREAM_OAUTH_CLIENT_SECRET go together"},
		{"an API key too", env("e2a-pool", secret, "E2A_UPSTREAM_API_KEY=sk-key-1234"), "E2A_UPSTREAM_API_KEY and E2A_UPSTREAM_OAUTH_* cannot go together"},
		{"http elsewhere", append(env("e2a-pool", secret), "E2A_UPSTREAM_OAUTH_TOKEN_URL=http://auth.example/token"), "E2A_UPSTREAM_OAUTH_TOKEN_URL: http to auth.example"},
		{"scopes alone", []string{"E2A_UPSTREAM_OAUTH_SCOPES=agents"}, "E2A_UPSTREAM_OAUTH_SCOPES or _AUDIENCE without"},
	} {
		code, out, errOut := runBin(t, embeddedEnv(append(c.env, "E2A_LOG_LEVEL=error")...), "agent", "--pool", "oauth", "--http", agent.URL+"/")
		if code != 1 || !strings.Contains(errOut, c.want) || strings.Contains(out+errOut, secret) || strings.Contains(out+errOut, "not-the-secret-31") {
			t.Errorf("%s: exit %d, want 1 saying %q without the secret: %s", c.name, code, c.want, strings.TrimSpace(errOut))
		}
	}
	if as.Issued() != issued {
		t.Errorf("the redirect was followed: %d tokens issued after it, want none", as.Issued()-issued)
	}
	if strings.Contains(strings.Join(dev.banner, "\n"), secret) {
		t.Error("e2a dev's banner holds the client secret")
	}
}

// TestTokenFetchBounded: a token endpoint that takes the request and never
// answers holds a token's fetch for the connect and idle timeouts together,
// and is asked once: x/oauth2, which does not know yet whether the endpoint
// takes the client's credentials in the header or in the form, tried the
// form after the header's try timed out, with a timeout of its own (twice
// the bound, the endpoint asked twice). The call fails retryable.
func TestTokenFetchBounded(t *testing.T) {
	t.Parallel()
	var asked atomic.Int64
	stop := make(chan struct{})
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		<-stop
	}))
	t.Cleanup(endpoint.Close)
	t.Cleanup(func() { close(stop) }) // before Close, which waits for the handler
	u := UpstreamConfig{OAuthTokenURL: endpoint.URL, OAuthClientID: "e2a-pool", OAuthClientSecret: "cs-0a1b2c3d4e5f",
		ConnectTimeout: time.Second, IdleTimeout: time.Second}
	o, err := u.tokenOption(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := bridge.NewClient("https://agent.example", o)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Authorize(context.Background(), http.Header{})
	if be := new(bridge.Error); !errors.As(err, &be) || !be.Retryable || !errors.Is(err, bridge.ErrNoToken) {
		t.Errorf("a token endpoint that does not answer: %v, want retryable", err)
	}
	if n := asked.Load(); n > 1 {
		t.Errorf("the token endpoint was asked %d times for one token within the bound, want once", n)
	}
}

// TestUpstreamOAuthTLS: an upstream on a private authority
// (E2A_UPSTREAM_TLS_CA, with a client certificate) behind an identity
// provider whose certificate the system trusts (SSL_CERT_FILE stands for
// the system's roots here): the token endpoint is called trusting the
// system's roots and the variable's, and the request is answered. The
// variable's authority alone was trusted for the token endpoint too, so
// every public identity provider failed the bridge's start.
func TestUpstreamOAuthTLS(t *testing.T) {
	const secret = "oauth-client-secret-7c3e"
	as := oauthtest.Start(t, "e2a-pool", secret, time.Hour)
	idp, private := testkit.WriteTLS(t, "127.0.0.1"), testkit.WriteTLS(t, "127.0.0.1")
	target, err := url.Parse(as.TokenURL())
	if err != nil {
		t.Fatal(err)
	}
	endpoint := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host}))
	endpoint.TLS = &tls.Config{Certificates: []tls.Certificate{idp.Pair}}
	endpoint.StartTLS()
	t.Cleanup(endpoint.Close)
	agent := httptest.NewUnstartedServer(as.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "answered over TLS with a token")
	})))
	agent.TLS = &tls.Config{Certificates: []tls.Certificate{private.Pair}}
	agent.StartTLS()
	t.Cleanup(agent.Close)

	dev := startDev(t, []string{"SSL_CERT_FILE=" + idp.CA, "E2A_UPSTREAM_TLS_CA=" + private.CA,
		"E2A_UPSTREAM_TLS_CERT=" + private.Cert, "E2A_UPSTREAM_TLS_KEY=" + private.Key,
		"E2A_UPSTREAM_OAUTH_TOKEN_URL=" + endpoint.URL + oauthtest.TokenPath, "E2A_UPSTREAM_OAUTH_CLIENT_ID=e2a-pool",
		"E2A_UPSTREAM_OAUTH_CLIENT_SECRET=" + secret}, "--http", agent.URL+"/")
	waitPoolLive(t, dev.base, "agent")
	if _, b := testkit.Do(t, "POST", dev.base+"/v1/requests?wait=true", `{"params":{"text":"hi"}}`); !strings.Contains(string(b), "answered over TLS with a token") {
		t.Errorf("through the agent: %.500s", b)
	}
}

// TestUpstreamOAuthFromCard: `e2a dev --a2a URL` with only the OAuth
// client's id and secret takes the token endpoint and the scopes from the
// agent card (an a2a-go/v2 agent whose oauth2 scheme's client-credentials
// flow names go-oauth2's endpoint and whose requirement asks for the
// scope agents, every call refused without a token of that scope): the
// request is answered, no call refused, the secret in no output. The start
// was refused before ("go together"). The client secret goes where the
// card says, so a token endpoint on another host than the agent's is used
// only once E2A_UPSTREAM_ALLOWED_HOSTS names it. A card that offers no such
// flow, that names a token endpoint on another host not allowed (or over
// http to another machine), or that asks for credentials itself ends the
// start (exit 1) naming E2A_UPSTREAM_OAUTH_TOKEN_URL.
func TestUpstreamOAuthFromCard(t *testing.T) {
	const secret = "oauth-client-secret-9e1f"
	as := oauthtest.Start(t, "e2a-pool", secret, time.Hour)
	client := []string{"E2A_UPSTREAM_OAUTH_CLIENT_ID=e2a-pool", "E2A_UPSTREAM_OAUTH_CLIENT_SECRET=" + secret}
	// A scope may hold a comma (RFC 6749 §3.3): the card's are kept whole.
	srv := up.Start(t, up.Options{Binding: up.JSONRPC, Token: as.ScopedHeader("api:read,write"),
		OAuthTokenURL: as.TokenURL(), OAuthScopes: []string{"agents", "api:read,write"}})
	dev := startDev(t, client, "--a2a", srv.BaseURL())
	waitPoolLive(t, dev.base, "agent")
	if _, b := testkit.Do(t, "POST", dev.base+"/v1/requests?wait=true", `{"params":{"text":"stream: oauth"}}`); !strings.Contains(string(b), `"succeeded"`) {
		t.Errorf("through the agent: %.500s", b)
	}
	calls := srv.Calls()
	for _, c := range calls {
		if c.Refused {
			t.Errorf("the agent refused %s: no token of the scope api:read,write", c.Method)
		}
	}
	if len(calls) == 0 || as.Issued() == 0 {
		t.Errorf("%d calls, %d tokens issued: want the agent called with a token", len(calls), as.Issued())
	}

	// A token endpoint on another host (127.0.0.2, this machine's loopback
	// by another address) is used once the operator allows that host.
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(as.TokenURL())
	other := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host}))
	other.Listener = l
	other.Start()
	t.Cleanup(other.Close)
	afar := up.Start(t, up.Options{Binding: up.JSONRPC, Token: as.ScopedHeader("agents"),
		OAuthTokenURL: other.URL + oauthtest.TokenPath, OAuthScopes: []string{"agents"}})
	issued := as.Issued()
	allowed := startDev(t, append(client, "E2A_UPSTREAM_ALLOWED_HOSTS=127.0.0.2"), "--a2a", afar.BaseURL())
	waitPoolLive(t, allowed.base, "agent")
	if _, b := testkit.Do(t, "POST", allowed.base+"/v1/requests?wait=true", `{"params":{"text":"stream: afar"}}`); !strings.Contains(string(b), `"succeeded"`) || as.Issued() == issued {
		t.Errorf("a token endpoint on an allowed host: %.500s", b)
	}

	bearer := up.Start(t, up.Options{Binding: up.JSONRPC, Token: as.ScopedHeader("agents")})
	elsewhere := up.Start(t, up.Options{Binding: up.JSONRPC, Token: as.ScopedHeader("agents"),
		OAuthTokenURL: "http://auth.example/token", OAuthScopes: []string{"agents"}})
	closed := up.Start(t, up.Options{Binding: up.JSONRPC, Token: as.ScopedHeader("agents"), OAuthTokenURL: as.TokenURL(),
		Fault: up.Fault{Kind: up.FaultStatus, Status: http.StatusUnauthorized, OnCard: true}})
	for _, c := range []struct {
		name, url, want string
	}{
		{"a bearer scheme only", bearer.BaseURL(), "offers no OAuth 2.0 client-credentials flow with a token URL (its security schemes: bearer)"},
		{"http elsewhere", elsewhere.BaseURL(), `the token URL of the agent card's scheme "oauth"`},
		{"another host not allowed", afar.BaseURL(), "not on the agent's host nor an allowed one: http://127.0.0.2:"},
		{"a card that asks for credentials", closed.BaseURL(), "answered 401 to a GET without a token"},
	} {
		code, out, errOut := runBin(t, embeddedEnv(append(client, "E2A_LOG_LEVEL=error")...), "agent", "--pool", "oauth", "--a2a", c.url)
		if code != 1 || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "E2A_UPSTREAM_OAUTH_TOKEN_URL") || strings.Contains(out+errOut, secret) {
			t.Errorf("%s: exit %d, want 1 saying %q and naming E2A_UPSTREAM_OAUTH_TOKEN_URL, without the secret: %s", c.name, code, c.want, strings.TrimSpace(errOut))
		}
	}
	if strings.Contains(strings.Join(dev.banner, "\n"), secret) {
		t.Error("e2a dev's banner holds the client secret")
	}
}

// TestTokenErrorWithoutSecret: a token endpoint whose error echoes what it
// was sent (the secret in the form, in the Basic header, base64) ends the
// start with its error quoted without the secret, whether the card named
// the endpoint or E2A_UPSTREAM_OAUTH_TOKEN_URL did: the bridge quoted the
// endpoint's error_description, which it scrubs of tokens only. The error
// names the scopes asked for where they came from (the card's, listed).
func TestTokenErrorWithoutSecret(t *testing.T) {
	const secret = "oauth-client-secret-echo-31"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// x/oauth2 sends the client's credentials in the Basic header
		// first, then, refused, in the form: both are echoed.
		form, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"invalid_client","error_description":"unknown client; sent `+r.Header.Get("Authorization")+` `+
			string(form)+`"}`)
	}))
	t.Cleanup(echo.Close)
	agent := up.Start(t, up.Options{Binding: up.JSONRPC, Token: func(http.Header) bool { return false },
		OAuthTokenURL: echo.URL + "/token", OAuthScopes: []string{"agents"}})
	client := []string{"E2A_UPSTREAM_OAUTH_CLIENT_ID=e2a-pool", "E2A_UPSTREAM_OAUTH_CLIENT_SECRET=" + secret, "E2A_LOG_LEVEL=debug"}
	basic := base64.StdEncoding.EncodeToString([]byte("e2a-pool:" + secret))
	for name, c := range map[string]struct {
		env    []string
		scopes string
	}{
		"from the card":                {client, `its scopes the agent card's ["agents"]`},
		"E2A_UPSTREAM_OAUTH_TOKEN_URL": {append(client, "E2A_UPSTREAM_OAUTH_TOKEN_URL="+echo.URL+"/token"), "its scopes E2A_UPSTREAM_OAUTH_SCOPES"},
	} {
		code, out, errOut := runBin(t, embeddedEnv(c.env...), "agent", "--pool", "echo", "--a2a", agent.BaseURL())
		if code != 1 || !strings.Contains(errOut, "client_secret=[redacted]") || !strings.Contains(errOut, c.scopes) ||
			strings.Contains(out+errOut, secret) || strings.Contains(out+errOut, basic) {
			t.Errorf("%s: exit %d, want 1 quoting the endpoint's error without the secret: %s", name, code, strings.TrimSpace(errOut))
		}
	}
}

// TestWithoutSecret: every form of the client secret an endpoint may echo
// (as given, form-encoded, in x/oauth2's Basic header with the id and
// secret form-encoded, or plain) is taken out of its error's
// description, URI and body; other errors pass as they are.
func TestWithoutSecret(t *testing.T) {
	const id, secret = "pool a", "s3cret/+&x"
	basic := base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id) + ":" + url.QueryEscape(secret)))
	plain := base64.StdEncoding.EncodeToString([]byte(id + ":" + secret))
	re := &oauth2.RetrieveError{ErrorCode: "invalid_client", ErrorDescription: "got " + secret + " and " + basic,
		ErrorURI: "https://idp.example/e?s=" + url.QueryEscape(secret), Body: []byte(`{"sent":"` + plain + `"}`)}
	var got *oauth2.RetrieveError
	if !errors.As(withoutSecret(re, id, secret), &got) {
		t.Fatal("not a RetrieveError")
	}
	all := got.ErrorDescription + got.ErrorURI + string(got.Body)
	if strings.Contains(all, secret) || strings.Contains(all, basic) || strings.Contains(all, plain) || strings.Contains(all, url.QueryEscape(secret)) ||
		strings.Count(all, "[redacted]") != 4 {
		t.Errorf("scrubbed: %q", all)
	}
	other := errors.New("dial tcp: refused")
	if withoutSecret(other, id, secret) != other {
		t.Error("another error was changed")
	}
}
