package a2abridge_test

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
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
// retries, each a task of its own that ran to its end for nobody; over
// HTTP/2 (an https agent) too until the header timeout was the bridge's
// own (net/http's error has another wording there, and wraps nothing).
func TestSilentBeforeFirstEventNotResent(t *testing.T) {
	t.Parallel()
	certs := testkit.WriteTLS(t, "127.0.0.1")
	h2 := &tls.Config{Certificates: []tls.Certificate{certs.Pair}, NextProtos: []string{"h2", "http/1.1"}}
	for _, c := range []struct {
		name  string
		opts  up.Options
		copts []bridge.ClientOption
	}{
		{"python-jsonrpc", up.Options{Binding: up.JSONRPC, Wire: up.WirePython}, nil},
		{"python-jsonrpc-h2", up.Options{Binding: up.JSONRPC, Wire: up.WirePython, TLS: h2},
			[]bridge.ClientOption{bridge.WithTLSConfig(&tls.Config{RootCAs: certs.Roots})}},
		{"grpc", up.Options{Binding: up.GRPC}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.opts.SlowInterval = 2 * time.Second
			srv := up.Start(t, c.opts)
			p := pipetest.Start(t)
			p.Pool("agent", newHandler(t, p, "agent", srv.BaseURL(), append(c.copts, bridge.WithIdleTimeout(300*time.Millisecond))...))
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

// TestContinuationSilentNotResent: the answer to an agent's question
// (a turn that continues its input-required task) sent to an agent
// without streaming, which works on it for longer than the idle timeout
// before SendMessage answers, is sent once, as a new task's message is
// (TestSilentBeforeFirstEventNotResent): the turn, which knew its task
// before sending, was taken for one the agent had answered, and the
// Handler sent the answer again at each retry.
func TestContinuationSilentNotResent(t *testing.T) {
	t.Parallel()
	srv := up.Start(t, up.Options{Binding: up.JSONRPC, NoStreaming: true, SlowInterval: 2 * time.Second})
	p := pipetest.Start(t)
	p.Pool("agent", newHandler(t, p, "agent", srv.BaseURL(), bridge.WithIdleTimeout(300*time.Millisecond)))
	c := v1Client(t, p, "agent")
	first := up.Collect(t, c.SendStreamingMessage(testCtx(t), &a2a.SendMessageRequest{Message: userMessage("ask: hi")}), nil)
	if first.State() != a2a.TaskStateInputRequired {
		t.Fatalf("first turn ended %s", first.State())
	}
	ans := userMessage("late: Ada")
	ans.TaskID, ans.ContextID = first.Task.TaskID, first.Task.ContextID
	for _, err := range c.SendStreamingMessage(testCtx(t), &a2a.SendMessageRequest{Message: ans}) {
		if err != nil {
			break
		}
	}
	sends := 0
	for _, c := range srv.CallsOf("SendMessage") {
		if c.Text == "late: Ada" {
			sends++
		}
	}
	if sends != 1 {
		t.Errorf("the answer was sent %d times, want once", sends)
	}
}

// TestAgentErrorQuotingHeaderTimeout: an agent's own error whose words
// quote net/http's header timeout (its call to a model timed out) is the
// agent's failure (upstream_unavailable, in its words), not the bridge's
// idle timeout: the bridge's classification read that text in any error
// and took it for a message sent and unanswered.
func TestAgentErrorQuotingHeaderTimeout(t *testing.T) {
	t.Parallel()
	const words = `calling the model: Post "https://llm.example/v1": net/http: timeout awaiting response headers`
	url := startV03Handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID any `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32603, "message": words}})
	}))
	p := pipetest.Start(t)
	p.Pool("agent", newHandler(t, p, "agent", url, bridge.WithIdleTimeout(2*time.Second)))
	a := p.Ask(t, "agent", `{"params":{"text":"hi"}}`)
	code, retryable := a.ErrorCode()
	body, _ := a.Final().Error()
	if code != bridge.CodeUnavailable || !retryable || !strings.Contains(body.Message, "calling the model") {
		t.Errorf("final %+v; want %s, retryable, in the agent's words", body, bridge.CodeUnavailable)
	}
}
