package a2abridge_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestLegacyCardPath: an agent of A2A before v0.3 (the Python SDK's 0.2
// releases) serves its card at /.well-known/agent.json, not at
// /.well-known/agent-card.json. Given the agent's base URL, the bridge
// reads the card there after the 404 of the new path, and the agent (a2a-go
// v0.3.15's JSON-RPC server, its card naming protocol version 0.2.5)
// answers a client of the pool through the pipeline. A base URL serving
// neither card fails naming both paths (upstream_rejected), a card refused
// or unavailable fails as upstream_auth or (retryable)
// upstream_unavailable, naming the path that answered so (the legacy one
// when the new one was not found), never the URL's path.
func TestLegacyCardPath(t *testing.T) {
	t.Parallel()
	url := startV03Card(t, slowV03{chunks: 3, interval: time.Millisecond}, "/.well-known/agent.json", "0.2.5")
	p := pipetest.Start(t)
	bridgePool(t, p, "legacy", url)
	v := up.Collect(t, v1Client(t, p, "legacy").SendStreamingMessage(context.Background(), up.Msg("old agent")), nil)
	if v.State() != a2a.TaskStateCompleted || v.Text(up.SlowArtifact) != slowText(3) {
		t.Errorf("through the agent with the legacy card: %s, %q, want completed with %q", v.State(), v.Text(up.SlowArtifact), slowText(3))
	}

	for _, c := range []struct {
		status    int // at both paths, or at the legacy path after a 404
		legacy    bool
		code      string
		retryable bool
		want      string
	}{
		{http.StatusNotFound, false, bridge.CodeRejected, false, "(/.well-known/agent-card.json answered 404 Not Found, nor was one at /.well-known/agent.json)"},
		{http.StatusUnauthorized, false, bridge.CodeAuth, false, "(/.well-known/agent-card.json) answered 401 Unauthorized"},
		{http.StatusServiceUnavailable, false, bridge.CodeUnavailable, true, "(/.well-known/agent-card.json) answered 503 Service Unavailable"},
		{http.StatusUnauthorized, true, bridge.CodeAuth, false, "(/.well-known/agent.json) answered 401 Unauthorized"},
		{http.StatusServiceUnavailable, true, bridge.CodeUnavailable, true, "(/.well-known/agent.json) answered 503 Service Unavailable"},
		{http.StatusOK, true, bridge.CodeProtocol, false, "(/.well-known/agent.json, /.well-known/agent-card.json answered 404)"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c.legacy && !strings.HasSuffix(r.URL.Path, "/agent.json") {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			if c.status == http.StatusOK {
				_, _ = w.Write([]byte("<html><body>the shop</body></html>"))
				return
			}
			w.WriteHeader(c.status)
		}))
		defer srv.Close()
		cl, err := bridge.NewClient(srv.URL + "/agents/secret-token-7f3a")
		if err != nil {
			t.Fatal(err)
		}
		u, err := a2abridge.New(context.Background(), cl)
		if err == nil {
			_ = u.Close()
			t.Fatalf("a card answered %d (legacy path %v): the bridge started", c.status, c.legacy)
		}
		var be *bridge.Error
		if !errors.As(err, &be) || be.Code != c.code || be.Retryable != c.retryable || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "secret-token") {
			t.Errorf("a card answered %d (legacy path %v): %v; want %s (retryable %v) saying %q, without the URL's path", c.status, c.legacy, err, c.code, c.retryable, c.want)
		}
	}
}
