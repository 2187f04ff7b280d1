package main

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/oauthtest"
)

// TestBridgeStartLogNamesCredentials: the line `e2a agent` logs when a
// bridge starts says which credentials go upstream (bridge.Credentials
// names them without their values: "api key", "header X-Tenant", or
// "none"; "oauth2 client credentials" for E2A_UPSTREAM_OAUTH_*, where it
// said none), so an operator can tell a missing E2A_UPSTREAM_API_KEY from a
// wrong one. Under the key "credentials" the process logger's redaction
// replaced that description with "[redacted]" whatever was configured,
// none included; the values themselves must still never appear.
func TestBridgeStartLogNamesCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(srv.Close)
	const key, tenant, secret = "k-7d41c9e2b5a3f860", "t-3b9f0a6c1e2d7485", "cs-5e8a2f719c0d4b36"
	as := oauthtest.Start(t, "e2a-pool", secret, time.Hour)
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"none", nil, `"credentials_used":"none"`},
		{"key and header", []string{"E2A_UPSTREAM_API_KEY=" + key, "E2A_UPSTREAM_HEADERS=X-Tenant: " + tenant},
			`"credentials_used":"api key, header X-Tenant"`},
		{"oauth", []string{"E2A_UPSTREAM_OAUTH_TOKEN_URL=" + as.TokenURL(), "E2A_UPSTREAM_OAUTH_CLIENT_ID=e2a-pool",
			"E2A_UPSTREAM_OAUTH_CLIENT_SECRET=" + secret}, `"credentials_used":"oauth2 client credentials"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := append(embeddedEnv(
				"E2A_LOG_FORMAT=json", "E2A_UPSTREAM_API_KEY=", "E2A_UPSTREAM_HEADERS="), c.env...)
			_, stderr := startBin(t, env, "agent", "--pool", "logcheck", "--http", srv.URL+"/")
			m, _ := waitLine(t, stderr, regexp.MustCompile(`"msg":"bridge".*`))
			if !strings.Contains(m[0], c.want) {
				t.Errorf("bridge start line does not say %s: %s", c.want, m[0])
			}
			if strings.Contains(m[0], key) || strings.Contains(m[0], tenant) || strings.Contains(m[0], secret) {
				t.Errorf("bridge start line holds a credential's value: %s", m[0])
			}
		})
	}
}

// TestBridgeUpstreamURLShownByHost: an upstream URL is shown by its scheme
// and host only, "/…" standing for its path or query (docs/security.md: a
// webhook's path may hold its token), in the line a bridge logs at start,
// in the start failure of an upstream that does not answer, and in the
// refusal of a URL holding user information. The start line showed the
// path (Location kept it), the refusal the path and the query.
func TestBridgeUpstreamURLShownByHost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(srv.Close)
	const hook = "/hook/PATH_SECRET?token=Q"
	leaks := func(s string) bool { return strings.Contains(s, "PATH_SECRET") || strings.Contains(s, "token=Q") }
	env := embeddedEnv("E2A_LOG_FORMAT=json",
		"E2A_UPSTREAM_API_KEY=", "E2A_UPSTREAM_HEADERS=", "E2A_UPSTREAM_CONNECT_TIMEOUT=2s")
	_, stderr := startBin(t, env, "agent", "--pool", "urlcheck", "--http", srv.URL+hook)
	m, _ := waitLine(t, stderr, regexp.MustCompile(`"msg":"bridge".*`))
	if want := `"url":"` + srv.URL + `/…"`; !strings.Contains(m[0], want) || leaks(m[0]) {
		t.Errorf("bridge start line: %s; want %s and neither the path nor the query", m[0], want)
	}
	dead := "http://127.0.0.1:" + strconv.Itoa(natstest.FreePorts(t, 1)[0])
	for _, url := range []string{dead + hook, "http://bot:pw@127.0.0.1:1" + hook} {
		code, _, errOut := runBin(t, env, "agent", "--pool", "urlcheck", "--http", url)
		if code == 0 || leaks(errOut) || strings.Contains(errOut, "bot") || !strings.Contains(errOut, "/…") {
			t.Errorf("--http %s: exit %d, want the URL shown as its scheme and host and \"/…\":\n%s", url, code, errOut)
		}
	}
}

// TestAgentWithoutNATSURLSaysItsServerIsItsOwn: `e2a agent` started
// without E2A_NATS_URL (beside an `e2a dev` on another port, say) serves
// an embedded server of its own, which no client reaches; it said nothing
// of it, and the pipeline's 404 for the pool told the user to start the
// pool they had started. It now warns at start, naming the variable.
func TestAgentWithoutNATSURLSaysItsServerIsItsOwn(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(srv.Close)
	env := embeddedEnv("E2A_LOG_FORMAT=json",
		"E2A_UPSTREAM_API_KEY=", "E2A_UPSTREAM_HEADERS=")
	_, stderr := startBin(t, env, "agent", "--pool", "ownserver", "--http", srv.URL+"/")
	m, before := waitLine(t, stderr, regexp.MustCompile(`"msg":"bridge".*`))
	if all := strings.Join(before, "\n"); !strings.Contains(all, "no E2A_NATS_URL") || !strings.Contains(all, "its own embedded NATS server") {
		t.Errorf("no warning that the pool serves its own server before its start line %s:\n%s", m[0], all)
	}
}

// TestBridgeStartSaysItChecks: before its check of the upstream a bridge
// says it is checking, where, and for how long at most (a server that
// takes the connection and never answers holds the start for the connect
// and idle timeouts); such a server then ends the start upstream_timeout,
// for each kind.
func TestBridgeStartSaysItChecks(t *testing.T) {
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(silent.Close)
	env := embeddedEnv("E2A_LOG_FORMAT=json",
		"E2A_UPSTREAM_CONNECT_TIMEOUT=2s", "E2A_UPSTREAM_IDLE_TIMEOUT=1s")
	for _, args := range [][]string{{"--a2a", silent.URL}, {"--http", silent.URL + "/"}, {"--openai", silent.URL + "/v1", "--model", "m"}} {
		code, _, errOut := runBin(t, env, append([]string{"agent", "--pool", "silent"}, args...)...)
		checking := regexp.MustCompile(`"msg":"checking the upstream","pool":"silent","kind":"` + strings.TrimPrefix(args[0], "--") + `".*"within":"3s"`)
		if code != 1 || !checking.MatchString(errOut) || !strings.Contains(errOut, "upstream_timeout") {
			t.Errorf("%v: exit %d, want 1 after the checking line and upstream_timeout:\n%s", args, code, errOut)
		}
	}
}
