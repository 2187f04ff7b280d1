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
// accepts a `POST /v1/requests?wait=true`, stores it in E2A_REQUESTS, and
// is then stopped (SIGTERM: its context ends) while the client waits for
// the answer. An accepted request must not be lost to its client: it was
// answered an empty 200 (the shutdown ended the request's context, taken
// for the client gone); it is answered 503, retryable, naming the request
// to read again. (A2A's blocking message/send still answers nothing at
// shutdown: not fixed.)
func TestShutdownWaitAnswerAccepted(t *testing.T) {
	for _, tc := range []struct {
		name, path, body, accept string
	}{
		{"e2a wait", "/v1/requests?wait=true", `{"params":{"text":"hi"}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { shutdownAccepted(t, tc.path, tc.body, tc.accept) })
	}
}

func shutdownAccepted(t *testing.T, path, reqBody, accept string) {
	srv, nc := natstest.RunServer(t)
	port := natstest.FreePorts(t, 1)[0]
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	t.Setenv("E2A_NATS_URL", srv.ClientURL())
	t.Setenv("E2A_HTTP_ADDR", addr)
	t.Setenv("E2A_PUSH", "off")
	t.Setenv("E2A_LOG_LEVEL", "error")
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
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
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
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
	if a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, `"retryable":true`) || !strings.Contains(a.body, "/v1/requests/") {
		t.Fatalf("an accepted request awaiting its answer was answered %d (headers %v) with body %q at shutdown; "+
			"want 503, retryable, naming the request to read again", a.status, a.header, a.body)
	}
}
