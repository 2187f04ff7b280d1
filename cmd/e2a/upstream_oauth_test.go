package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
