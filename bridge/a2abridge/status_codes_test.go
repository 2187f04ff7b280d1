package a2abridge_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestA2AStatusRetried: an A2A agent (or the gateway before it) answering
// one call with HTTP 503, or 429 with Retry-After, before any frame is
// retried by the bridge, as docs/agents.md promises for every bridge, so
// the request completes; on each binding and on v0.3. On JSON-RPC it ended
// upstream_protocol_error, not retryable, after one call (a2a-go's client
// reads a non-200 answer into a bare message).
func TestA2AStatusRetried(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name string
		o    up.Options
	}{
		{"jsonrpc", up.Options{Binding: up.JSONRPC}},
		{"rest", up.Options{Binding: up.HTTPJSON}},
		{"grpc", up.Options{Binding: up.GRPC}},
		{"v03", up.Options{Binding: up.JSONRPC, V03: true}},
	} {
		for _, f := range []up.Fault{
			{Kind: up.FaultStatus, Status: http.StatusServiceUnavailable, Times: 1},
			{Kind: up.FaultStatus, Status: http.StatusTooManyRequests, RetryAfter: "1", Times: 1},
		} {
			t.Run(fmt.Sprintf("%s/%d", v.name, f.Status), func(t *testing.T) {
				t.Parallel()
				a, srv := askFaulted(t, v.o, f)
				code, retryable := a.ErrorCode()
				if fin := a.Final(); fin == nil || fin.ResponseKind != e2a.KindComplete {
					t.Errorf("one %d before any frame: request ended %s (code %q, retryable %v), faulted %d calls; want it retried and completed",
						f.Status, kindOf(fin), code, retryable, srv.Faulted())
				}
			})
		}
	}
}

// TestA2AStatusCodes: an A2A agent that keeps answering an HTTP error
// status ends the request with the code docs/agents.md gives the status
// (503 → upstream_unavailable, 429 → upstream_rate_limited, both
// retryable; 401 → upstream_auth, not retryable; on gRPC the matching
// codes Unavailable, ResourceExhausted, Unauthenticated), on each binding.
// JSON-RPC's were all upstream_protocol_error, HTTP+JSON's 401 retried as
// unavailable, and 429 was unavailable on HTTP+JSON and gRPC.
func TestA2AStatusCodes(t *testing.T) {
	t.Parallel()
	for _, b := range []struct {
		name string
		o    up.Options
	}{
		{"jsonrpc", up.Options{Binding: up.JSONRPC}},
		{"rest", up.Options{Binding: up.HTTPJSON}},
		{"grpc", up.Options{Binding: up.GRPC}},
	} {
		for _, c := range []struct {
			status    int
			code      string
			retryable bool
		}{
			{http.StatusServiceUnavailable, bridge.CodeUnavailable, true},
			{http.StatusTooManyRequests, bridge.CodeRateLimited, true},
			{http.StatusUnauthorized, bridge.CodeAuth, false},
		} {
			t.Run(fmt.Sprintf("%s/%d", b.name, c.status), func(t *testing.T) {
				t.Parallel()
				a, srv := askFaulted(t, b.o, up.Fault{Kind: up.FaultStatus, Status: c.status})
				code, retryable := a.ErrorCode()
				if code != c.code || retryable != c.retryable {
					t.Errorf("HTTP %d: e2a.error %q retryable %v after %d calls; want %q retryable %v",
						c.status, code, retryable, srv.Faulted(), c.code, c.retryable)
				}
			})
		}
	}
}

// askFaulted asks a bridge pool of an agent started with o, its fault f
// set, for one answer.
func askFaulted(t *testing.T, o up.Options, f up.Fault) (pipetest.Answer, *up.Server) {
	t.Helper()
	srv := up.Start(t, o)
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", srv.BaseURL())
	if err := srv.SetFault(f); err != nil {
		t.Fatal(err)
	}
	return p.Ask(t, "agent", `{"params":{"text":"hello"}}`), srv
}

func kindOf(f *e2a.Response) string {
	if f == nil {
		return "without a frame"
	}
	return f.ResponseKind
}
