package console_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// TestAuthErrorSpeaksToTheClient: a refused credential, on sign-in and on
// any API call, is answered with what a client reads of the refusal (no
// "ingress: " prefix of the Go error); once the client address is over the
// failure limit, 429 with Retry-After and a message saying when to retry.
func TestAuthErrorSpeaksToTheClient(t *testing.T) {
	const limit = 3
	lcfg := ingress.DefaultAuthLimitConfig()
	lcfg.MaxFailures = limit
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true,
		authOpts: []ingress.AuthOption{ingress.WithAuthLimit(lcfg)}})
	const wrong = "ak_wrong_console_test_0123456789"
	login := func(secret string) (*http.Response, []byte) {
		return p.do(t, "POST", "/console/api/login", `{"scheme":"apiKey","secret":"`+secret+`"}`, "X-E2A-Console", "1")
	}
	list := func(secret string) (*http.Response, []byte) {
		return p.do(t, "GET", "/console/api/requests", "", "X-Api-Key", secret)
	}
	for i, call := range []func(string) (*http.Response, []byte){login, list, login} {
		resp, b := call(wrong)
		code, msg := consoleError(b)
		if resp.StatusCode != http.StatusUnauthorized || code != "unauthenticated" || msg == "" || strings.Contains(msg, "ingress:") {
			t.Errorf("call %d with a wrong key: %d %s; want 401 unauthenticated saying why without the package's prefix", i, resp.StatusCode, b)
		}
	}
	for name, call := range map[string]func(string) (*http.Response, []byte){"login": login, "list": list} {
		resp, b := call(keyAlice)
		code, msg := consoleError(b)
		ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != http.StatusTooManyRequests || code != "rate_limit_exceeded" || err != nil || ra < 1 {
			t.Fatalf("%s after %d wrong keys: %d Retry-After %q %s; want 429 rate_limit_exceeded with Retry-After",
				name, limit, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
		if want := "retry in " + strconv.Itoa(ra) + " s"; !strings.Contains(msg, want) || strings.Contains(msg, "ingress:") {
			t.Errorf("%s throttled: message %q; want it to say %q (the Retry-After), without the package's prefix", name, msg, want)
		}
	}
}

// TestAuthThrottledWithoutChallengeSetsRetryAfter: an AuthFunc answering
// 429 on a console with no challenge function still gets Retry-After.
func TestAuthThrottledWithoutChallengeSetsRetryAfter(t *testing.T) {
	_, nc := natstest.RunServer(t)
	con, err := console.New(t.Context(), nc, nil, console.WithoutIndexer(),
		console.WithAuth(func(*http.Request) (tenant.Principal, int, error) {
			return tenant.Principal{}, http.StatusTooManyRequests, errors.New("ingress: unauthenticated: too many failed authentications: retry later")
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(con.Close)
	srv := serveConsole(t, con)
	resp, b := testkit.Do(t, "GET", srv.URL+"/console/api/session", "", "X-Api-Key", keyAlice)
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	_, msg := consoleError(b)
	if resp.StatusCode != http.StatusTooManyRequests || err != nil || ra < 1 || !strings.Contains(msg, "retry in "+strconv.Itoa(ra)+" s") {
		t.Errorf("throttled without a challenge: %d Retry-After %q %s; want 429 with Retry-After and the message saying it",
			resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
}
