package a2abridge_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestAnswerWhileTheAskWindsDown: an agent that does not stream, which
// the bridge polls with GetTask, shows its task in input-required while
// a2a-go/v2's server still counts the execution as running
// (up.Server.HoldAsks holds that window open); the answer arriving then is
// refused ("task execution is already in progress", an internal error to
// the client). The bridge retries the answer, nothing having been written
// for it yet, and it continues the agent's task. Over each binding. Under
// load TestFrontDoors/go-jsonrpc-nostream hit the window by chance: the
// answer ended with upstream_protocol_error.
func TestAnswerWhileTheAskWindsDown(t *testing.T) {
	t.Parallel()
	for _, b := range []a2a.TransportProtocol{up.JSONRPC, up.HTTPJSON, up.GRPC} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			srv := up.Start(t, up.Options{Binding: b, NoStreaming: true})
			release := srv.HoldAsks()
			t.Cleanup(release)
			p := pipetest.Start(t)
			// Retries far enough apart for the held execution to return
			// between them once released.
			p.Pool("agent", newRetryingHandler(t, p, "agent", srv.BaseURL(), bridge.WithRetry(3, 100*time.Millisecond, 400*time.Millisecond)))
			c := v1Door(a2a.TransportProtocolJSONRPC, false)(t, p, "agent")

			q := c.send(t, "ask: wind down")
			if q.state != "input-required" {
				t.Fatalf("ask: %s %q, want input-required", q.state, q.text)
			}
			refused := make(chan error, 1)
			go func() {
				select {
				case err := <-srv.Refusals():
					refused <- err
				case <-testCtx(t).Done():
					refused <- errors.New("no refusal")
				}
				release()
			}()
			a := c.send(t, "Ada")
			if err := <-refused; !strings.Contains(err.Error(), "already in progress") {
				t.Errorf("the agent's refusal: %v, want a2a-go's execution in progress", err)
			}
			if a.state != "completed" || !strings.Contains(a.text, up.AskReply("Ada")) {
				t.Errorf("answer: %s %q, want completed with %q", a.state, a.text, up.AskReply("Ada"))
			}
			asked, _ := executionOf(srv, "ask: wind down")
			answered, continued := executionOf(srv, "Ada")
			if asked == "" || answered != asked || !continued {
				t.Errorf("the answer ran in upstream task %q (continued %v), the question in %q", answered, continued, asked)
			}
		})
	}
}

// TestAgentFailureRetryable: an A2A internal or server error (JSON-RPC
// -32603 or -32000, gRPC Internal or Unavailable) is the agent's own
// failure, as an HTTP 5xx is: upstream_unavailable, retryable. An answer
// the client cannot read stays a protocol error.
func TestAgentFailureRetryable(t *testing.T) {
	for _, c := range []struct {
		err       error
		code      string
		retryable bool
	}{
		{a2a.NewError(a2a.ErrInternalError, "task execution is already in progress"), bridge.CodeUnavailable, true},
		{a2a.ErrServerError, bridge.CodeUnavailable, true},
		{a2a.ErrInvalidAgentResponse, bridge.CodeProtocol, false},
		{errors.New("no A2A error"), bridge.CodeProtocol, false},
	} {
		var be *bridge.Error
		if err := a2abridge.UpstreamError(c.err); !errors.As(err, &be) || be.Code != c.code || be.Retryable != c.retryable {
			t.Errorf("%v: %v, want %s retryable %v", c.err, err, c.code, c.retryable)
		}
	}
}
