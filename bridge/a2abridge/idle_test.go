package a2abridge_test

import (
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestIdleTimeout: an agent that hangs (it accepts the call and answers
// nothing) ends the request with upstream_timeout, retryable, after the
// client's idle timeout (the message not sent again:
// TestSilentBeforeFirstEventNotResent), on each binding: gRPC too, where
// the HTTP client's timeouts do not reach (before grpcIdle the request
// waited until the test's deadline). A slow stream whose first event came
// in time is not cut between events longer apart than the idle timeout.
func TestIdleTimeout(t *testing.T) {
	t.Parallel()
	for _, b := range []a2a.TransportProtocol{up.JSONRPC, up.HTTPJSON, up.GRPC} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			srv := up.Start(t, up.Options{Binding: b})
			p := pipetest.Start(t)
			p.Pool("agent", newHandler(t, p, "agent", srv.BaseURL(), bridge.WithIdleTimeout(300*time.Millisecond)))
			if err := srv.SetFault(up.Fault{Kind: up.FaultHang}); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			a := p.Ask(t, "agent", `{"params":{"text":"stream: hang"}}`)
			code, retryable := a.ErrorCode()
			if code != bridge.CodeTimeout || !retryable {
				t.Errorf("final %+v: want %s, retryable", a.Final(), bridge.CodeTimeout)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("ended after %v", d)
			}

			slow := up.Start(t, up.Options{Binding: b, SlowInterval: 500 * time.Millisecond, SlowChunks: 3})
			p.Pool("slow", newHandler(t, p, "slow", slow.BaseURL(), bridge.WithIdleTimeout(300*time.Millisecond)))
			a = p.Ask(t, "slow", `{"params":{"text":"slow: but steady"}}`)
			if f := a.Final(); f == nil || f.ResponseKind != e2a.KindComplete {
				t.Errorf("a stream with events 500 ms apart, idle timeout 300 ms: final %+v", f)
			}
		})
	}
}

// TestSilentBeforeFirstEventNotResent: an agent that works on the message
// for longer than the idle timeout before its first event (the Python and
// Java SDKs send a stream's headers only with it; on gRPC a stream's first
// message) ends the request upstream_timeout, retryable, saying so, and
// gets the message once. The Handler sent it again at each of its
// retries, each a task of its own that ran to its end for nobody.
func TestSilentBeforeFirstEventNotResent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		opts up.Options
	}{
		{"python-jsonrpc", up.Options{Binding: up.JSONRPC, Wire: up.WirePython}},
		{"grpc", up.Options{Binding: up.GRPC}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.opts.SlowInterval = 2 * time.Second
			srv := up.Start(t, c.opts)
			p := pipetest.Start(t)
			p.Pool("agent", newHandler(t, p, "agent", srv.BaseURL(), bridge.WithIdleTimeout(300*time.Millisecond)))
			a := p.Ask(t, "agent", `{"params":{"text":"late: thinking first"}}`)
			code, retryable := a.ErrorCode()
			body, _ := a.Final().Error()
			if code != bridge.CodeTimeout || !retryable || !strings.Contains(body.Message, "not sent again") {
				t.Errorf("final %+v: want %s, retryable, saying the message is not sent again", body, bridge.CodeTimeout)
			}
			if n := len(srv.Executions()); n != 1 {
				t.Errorf("the agent got the message %d times, want once", n)
			}
		})
	}
}
