package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestShutdownWaitAnswerAccepted: `e2a serve` (runServe, in process)
// accepts a request whose client waits for its one answer (E2A
// `?wait=true`, A2A v0.3 message/send, A2A v1.0 SendMessage on JSON-RPC and
// HTTP+JSON), stores it in E2A_REQUESTS, and is then stopped (SIGTERM: its
// context ends) while the client waits. An accepted request must not be
// lost to its client: E2A's was answered an empty 200 (the shutdown ended
// the request's context, taken for the client gone), now 503, retryable,
// naming the request to read again; A2A's answered an empty 200 (v0.3),
// -32603 "context canceled" or 499 CANCELLED (v1.0), now the Task as it
// stands (submitted), which the client follows as after a non-blocking
// send. The shutdown may also come before the front door has its PubAck
// (the test cannot order the two): then E2A answers 503 retryable too
// (it answered 499, as if the client had gone), A2A v0.3 503 retryable,
// v1.0 its temporary failure, "retry later" (JSON-RPC -32000, HTTP+JSON
// 503 UNAVAILABLE: it was 500 INTERNAL, which CI2 met in this race).
func TestShutdownWaitAnswerAccepted(t *testing.T) {
	const v1Msg = `{"message":{"role":"ROLE_USER","messageId":"m1","parts":[{"text":"hi"}]}}`
	unavailable := func(body string) bool {
		return strings.Contains(body, `"retryable":true`) && strings.Contains(body, "/v1/requests/")
	}
	for _, tc := range []struct {
		name, path, body string
		// ok reports whether status and body are the answer wanted.
		ok func(status int, body string) bool
	}{
		{"e2a wait", "/v1/requests?wait=true", `{"params":{"text":"hi"}}`, func(st int, b string) bool {
			return st == http.StatusServiceUnavailable && unavailable(b)
		}},
		{"a2a v0.3 message/send", "/a2a", `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":` +
			`{"role":"user","messageId":"m1","kind":"message","parts":[{"kind":"text","text":"hi"}]}}}`, func(st int, b string) bool {
			return st == http.StatusOK && strings.Contains(b, `"result":{"kind":"task","id":"`) && strings.Contains(b, `"state":"submitted"`) ||
				st == http.StatusServiceUnavailable && strings.Contains(b, `"retryable":true`)
		}},
		{"a2a v1.0 SendMessage", "/a2a/v1", `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":` + v1Msg + `}`, func(st int, b string) bool {
			return st == http.StatusOK && strings.Contains(b, `"result":{"task":{"id":"`) && strings.Contains(b, `"TASK_STATE_SUBMITTED"`) ||
				st == http.StatusOK && strings.Contains(b, `"code":-32000`) && strings.Contains(b, "retry later")
		}},
		{"a2a v1.0 REST message:send", "/a2a/v1/message:send", v1Msg, func(st int, b string) bool {
			return st == http.StatusOK && strings.HasPrefix(b, `{"task":{"id":"`) && strings.Contains(b, `"TASK_STATE_SUBMITTED"`) ||
				st == http.StatusServiceUnavailable && strings.Contains(b, `"status":"UNAVAILABLE"`) && strings.Contains(b, "retry later")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { shutdownAccepted(t, tc.path, tc.body, tc.ok) })
	}
}

// configWith is LoadConfig with the variables kv ("NAME=value") set for
// the test.
func configWith(t *testing.T, kv ...string) Config {
	t.Helper()
	for _, v := range kv {
		name, val, _ := strings.Cut(v, "=")
		t.Setenv(name, val)
	}
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func shutdownAccepted(t *testing.T, path, reqBody string, ok func(status int, body string) bool) {
	srv, nc := natstest.RunServer(t)
	port := natstest.FreePorts(t, 1)[0]
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cfg := configWith(t, "E2A_NATS_URL="+srv.ClientURL(), "E2A_HTTP_ADDR="+addr, "E2A_PUSH=off", "E2A_LOG_LEVEL=error")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, cfg, nil) }()
	testkit.Eventually(t, 15*time.Second, "serve answering /healthz", func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})

	js := natstest.JetStream(t, nc)
	st, err := js.Stream(context.Background(), streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	// The pool exists (a worker of it started once) but no worker runs now.
	cc, err := streams.AgentConsumerConfig("demo", 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(context.Background(), streams.RequestsStream, cc); err != nil {
		t.Fatal(err)
	}
	before, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	type answer struct {
		status int
		header http.Header
		body   string
		err    error
	}
	ans := make(chan answer, 1)
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	go func() {
		req, _ := http.NewRequestWithContext(rctx, http.MethodPost, "http://"+addr+path,
			strings.NewReader(reqBody))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ans <- answer{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		ans <- answer{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
	}()
	// The request is accepted: stored in E2A_REQUESTS (no worker runs, so
	// the client waits for its answer).
	testkit.Eventually(t, 15*time.Second, "the request stored", func() bool {
		select {
		case a := <-ans:
			t.Fatalf("answered before the shutdown: %d %q %v", a.status, a.body, a.err)
		default:
		}
		info, err := st.Info(context.Background())
		return err == nil && info.State.LastSeq > before.State.LastSeq
	})
	select {
	case a := <-ans:
		t.Fatalf("answered before the shutdown: %d %q %v", a.status, a.body, a.err)
	default:
	}
	cancel() // SIGTERM
	var a answer
	select {
	case a = <-ans:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer 30 s after the shutdown began")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Logf("runServe: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("runServe still running 30 s after the shutdown began")
	}
	if a.err != nil {
		t.Fatalf("the accepted request's client got a transport error at shutdown (request id never told): %v", a.err)
	}
	if !ok(a.status, a.body) {
		t.Fatalf("an accepted request awaiting its answer was answered %d (headers %v) with body %q at shutdown; "+
			"want its answer as it stands (E2A: 503, retryable, naming the request to read again; A2A: the Task, submitted)",
			a.status, a.header, a.body)
	}
}
