package a2abridge_test

import (
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestGatewayJSONErrors: an HTTP+JSON agent (a2a-go/v2's REST handler)
// behind a gateway or an auth middleware that refuses the bridge's calls
// with a JSON body of its own, not A2A's error (Kong's and API Gateway's
// {"message": …}, FastAPI's {"detail": …}; a v0.3 Python agent's errors
// too): the request ends with the code of the HTTP status, as a text
// page's would. a2a-go read every such body as the agent's internal
// error: a 401, 403 or 404 was retried as upstream_unavailable and
// ended so, retryable.
func TestGatewayJSONErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status    int
		body      string
		code      string
		retryable bool
	}{
		{http.StatusUnauthorized, `{"message":"Unauthorized"}`, bridge.CodeAuth, false},
		{http.StatusForbidden, `{"detail":"Not authenticated"}`, bridge.CodeAuth, false},
		{http.StatusNotFound, `{"detail":"Not Found"}`, bridge.CodeRejected, false},
		{http.StatusBadGateway, `{"message":"An invalid response was received from the upstream server"}`, bridge.CodeUnavailable, true},
	} {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			t.Parallel()
			base := serveRESTBehindGateway(t, c.status, c.body)
			p := pipetest.Start(t)
			bridgePool(t, p, "agent", base)
			a := p.Ask(t, "agent", `{"params":{"text":"hello"}}`)
			if code, retryable := a.ErrorCode(); code != c.code || retryable != c.retryable {
				t.Errorf("HTTP %d %s: e2a.error %q retryable %v, want %q retryable %v (final %s)",
					c.status, c.body, code, retryable, c.code, c.retryable, a.Final().Body)
			}
		})
	}
}

// serveRESTBehindGateway serves an HTTP+JSON agent's v1.0 card, its
// interface behind a gateway answering every A2A call with status and
// the JSON body.
func serveRESTBehindGateway(t *testing.T, status int, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	card := testCard(a2a.NewAgentInterface(base+"/rest", a2a.TransportProtocolHTTPJSON), true)
	mux := http.NewServeMux()
	mux.Handle("/rest/", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return base
}
