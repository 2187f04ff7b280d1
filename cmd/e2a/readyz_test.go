package main

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// startStageForReadyz runs `e2a args...` in this process against the
// server at natsURL with its operations on a free port, and returns that
// base URL once /readyz answers 200; the stage stops when the test ends.
func startStageForReadyz(t *testing.T, natsURL string, env map[string]string, args ...string) string {
	t.Helper()
	port := strconv.Itoa(natstest.FreePorts(t, 1)[0])
	t.Setenv("E2A_NATS_URL", natsURL)
	t.Setenv("E2A_HTTP_ADDR", "127.0.0.1:"+port)
	t.Setenv("E2A_LOG_LEVEL", "error")
	for k, v := range env {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, args) }()
	t.Cleanup(func() {
		cancel()
		testkit.Receive(t, done, 30*time.Second, "e2a "+args[0]+" stopped")
	})
	base := "http://127.0.0.1:" + port
	waitReadyz(t, base, http.StatusOK, "")
	return base
}

// waitReadyz waits until /readyz answers code with a body holding want,
// failing the test with the last answer.
func waitReadyz(t *testing.T, base string, code int, want string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	var last string
	ok := testkit.Until(30*time.Second, func() bool {
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			last = err.Error()
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		last = resp.Status + " " + string(b)
		return resp.StatusCode == code && strings.Contains(string(b), want)
	})
	if !ok {
		t.Fatalf("/readyz: want %d naming %q; last answer: %s", code, want, last)
	}
}

// TestReadyzServeNeedsItsBuckets: `e2a serve` is unready, naming what is
// gone, while a KV bucket it reads and writes per request (E2A_TASKS, and
// E2A_RATELIMIT with a rate limit) or the push stage's durable consumer
// is missing, and ready again once it is back.
func TestReadyzServeNeedsItsBuckets(t *testing.T) {
	srv, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	base := startStageForReadyz(t, srv.ClientURL(), map[string]string{"E2A_RATE_LIMIT_PER_MINUTE": "1000"}, "serve")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, b := range []string{streams.TasksBucket, streams.RateLimitBucket} {
		if err := js.DeleteKeyValue(ctx, b); err != nil {
			t.Fatal(err)
		}
		waitReadyz(t, base, http.StatusServiceUnavailable, "bucket "+b)
		if rep, err := streams.Apply(ctx, js, natstest.Config()); err != nil {
			t.Fatalf("%v\n%s", err, rep)
		}
		waitReadyz(t, base, http.StatusOK, "")
	}
	consumerGoneThenBack(ctx, t, js, base, streams.ResponsesStream, push.DefaultConsumer)
}

// TestReadyzAgentNeedsItsConsumer: `e2a agent --pool demo` is unready,
// naming agent-demo, while the pool's durable consumer is deleted (the
// runtime does not make it again: it pulls nothing until it is back), and
// ready again once it is back.
func TestReadyzAgentNeedsItsConsumer(t *testing.T) {
	srv, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	base := startStageForReadyz(t, srv.ClientURL(), nil, "agent", "--pool", "demo")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	consumerGoneThenBack(ctx, t, js, base, streams.RequestsStream, "agent-demo")
}

// TestReadyzPushNeedsItsBucketAndConsumers: `e2a push` is unready, naming
// it, while E2A_PUSH or its wake-up consumer (push-wake on KV_E2A_PUSH) is
// gone.
func TestReadyzPushNeedsItsBucketAndConsumers(t *testing.T) {
	srv, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	sc := natstest.Config()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := js.CreateOrUpdateKeyValue(ctx, sc.PushBucketConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, sc.PushDeadStreamConfig()); err != nil {
		t.Fatal(err)
	}
	base := startStageForReadyz(t, srv.ClientURL(), nil, "push")
	consumerGoneThenBack(ctx, t, js, base, "KV_"+streams.PushBucket, push.DefaultConsumer+"-wake")
	if err := js.DeleteKeyValue(ctx, streams.PushBucket); err != nil {
		t.Fatal(err)
	}
	waitReadyz(t, base, http.StatusServiceUnavailable, "bucket "+streams.PushBucket)
}

// consumerGoneThenBack deletes the durable consumer name on stream and
// waits for base's /readyz to answer 503 naming it, then makes it again
// as it was and waits for 200.
func consumerGoneThenBack(ctx context.Context, t *testing.T, js jetstream.JetStream, base, stream, name string) {
	t.Helper()
	cc, err := js.Consumer(ctx, stream, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteConsumer(ctx, stream, name); err != nil {
		t.Fatal(err)
	}
	waitReadyz(t, base, http.StatusServiceUnavailable, "consumer "+name+" on "+stream)
	if _, err := js.CreateConsumer(ctx, stream, cc.CachedInfo().Config); err != nil {
		t.Fatal(err)
	}
	waitReadyz(t, base, http.StatusOK, "")
}
