package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestDemoBearerSchemeAnyCase: the console authenticates a request
// carrying "Authorization: bearer <token>" (ingress's Auth takes the scheme
// case-insensitively, as RFC 9110 says), and POST /console/api/demo hands
// that credential on to ingress whatever the scheme's case. The console
// kept it only when the header started with the exact "Bearer ": the demo
// reached ingress without a credential and was refused 401.
func TestDemoBearerSchemeAnyCase(t *testing.T) {
	_, nc := natstest.RunServer(t)
	const token = "tok_console_review_bearer_0123456789"
	a, err := ingress.NewAuth(&ingress.AuthConfig{BearerTokens: []ingress.Credential{{Principal: "carol", Secret: token}}})
	if err != nil {
		t.Fatal(err)
	}
	eg, err := egress.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eg.Close)
	in, err := ingress.New(nc, eg, ingress.WithAuth(a))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	in.Register(mux)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	con, err := console.New(ctx, nc, eg, console.WithAuth(authFunc(a)), console.WithDemo(mux, demo.Pool))
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	con.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, scheme := range []string{"Bearer", "bearer"} {
		resp, b := testkit.Do(t, "POST", srv.URL+"/console/api/demo", `{"text":"hi","frames":1}`,
			"Content-Type", "application/json", "X-E2A-Console", "1", "Authorization", scheme+" "+token)
		if resp.StatusCode != http.StatusAccepted {
			t.Errorf("POST /console/api/demo with Authorization: %s <token>: %d %s (the session with the same header: %d)",
				scheme, resp.StatusCode, b, sessionStatus(t, srv.URL, scheme+" "+token))
		}
	}
}

func sessionStatus(t *testing.T, url, authz string) int {
	t.Helper()
	resp, _ := testkit.Do(t, "GET", url+"/console/api/session", "", "Authorization", authz)
	return resp.StatusCode
}
