package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
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
	waitReadyzWithin(t, base, code, want, 30*time.Second)
}

// waitReadyzWithin is waitReadyz waiting at most d.
func waitReadyzWithin(t *testing.T, base string, code int, want string, d time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	var last string
	ok := testkit.Until(d, func() bool {
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
// E2A_RATELIMIT with a rate limit) is missing, and ready again once it is
// back; the push stage's durable consumer, deleted, is made again.
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
	consumerMadeAgain(ctx, t, js, base, streams.ResponsesStream, push.DefaultConsumer)
}

// TestReadyzAgentMakesItsConsumerAgain: `e2a agent --pool demo` whose
// pool's durable consumer is deleted makes it again and is ready (it
// pulled nothing until a restart, ready all the while).
func TestReadyzAgentMakesItsConsumerAgain(t *testing.T) {
	srv, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	base := startStageForReadyz(t, srv.ClientURL(), nil, "agent", "--pool", "demo")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	consumerMadeAgain(ctx, t, js, base, streams.RequestsStream, "agent-demo")
}

// TestReadyzPushNeedsItsBucket: `e2a push` is unready, naming it, while
// E2A_PUSH is gone; its wake-up consumer (push-wake on KV_E2A_PUSH),
// deleted, is made again.
func TestReadyzPushNeedsItsBucket(t *testing.T) {
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
	consumerMadeAgain(ctx, t, js, base, streams.KVStream(streams.PushBucket), push.WakeConsumer(push.DefaultConsumer))
	if err := js.DeleteKeyValue(ctx, streams.PushBucket); err != nil {
		t.Fatal(err)
	}
	waitReadyz(t, base, http.StatusServiceUnavailable, "bucket "+streams.PushBucket)
}

// consumerMadeAgain deletes the durable consumer name on stream and waits
// for the process behind base to make it again (the agent runtime and the
// push stage do: agent/rebind.go, push/rebind.go) and for its /readyz to
// answer 200. That /readyz names a consumer that stays missing is
// internal/obs's TestPresenceChecks: here it is made again at once.
func consumerMadeAgain(ctx context.Context, t *testing.T, js jetstream.JetStream, base, stream, name string) {
	t.Helper()
	cc, err := js.Consumer(ctx, stream, name)
	if err != nil {
		t.Fatal(err)
	}
	was := cc.CachedInfo().Created
	if err := js.DeleteConsumer(ctx, stream, name); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "consumer "+name+" on "+stream+" made again", func() bool {
		c, err := js.Consumer(ctx, stream, name)
		return err == nil && c.CachedInfo().Created.After(was)
	})
	waitReadyz(t, base, http.StatusOK, "")
}

// TestReadyzDevReadyWithoutLiveWorker: `e2a dev`'s /readyz names a pool
// whose (bridge) worker stopped "no live worker" and stays 200: the front
// doors still take its requests, which wait for a worker (their answer's
// warning says so), so taking the process out of its Service would refuse
// every other pool's requests too. docs/operations.md says so.
func TestReadyzDevReadyWithoutLiveWorker(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile("`no live worker`[^.]*; `/readyz` stays 200").Match(b) {
		t.Errorf("docs/operations.md does not say /readyz stays 200 while a pool has no live worker")
	}
	srv, _ := natstest.RunServer(t)
	base := startStageForReadyz(t, srv.ClientURL(), nil, "dev")
	upstream, _ := probedUpstream(t)
	t.Setenv("E2A_HTTP_ADDR", "127.0.0.1:0") // the worker's own operations listener
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"agent", "--pool", "gone", "--http", upstream.URL + "/agent"}) }()
	waitReadyz(t, base, http.StatusOK, `"gone":"live"`)
	cancel()
	testkit.Receive(t, done, 30*time.Second, "the bridge worker stopped")
	waitReadyz(t, base, http.StatusOK, `"gone":"no live worker"`)
}

// TestReadyzDegradedWithoutQuorum: a NATS cluster without a JetStream
// quorum (two servers of three stopped) fails every replica alike, and
// each front door answers that with its protocol's retryable refusal;
// /readyz of `e2a serve` and of an agent stays 200, "degraded", the cause
// named and e2a_jetstream_unavailable 1, while the process's own
// connection is up (a 503 on every replica left Kubernetes' Service no
// endpoint, and clients the load balancer's bare 503). It is 503 once
// the process's connection is down (the last server stopped), and ready
// again when the cluster is back.
func TestReadyzDegradedWithoutQuorum(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	// Every stream, bucket and consumer on the three servers, as
	// RunCluster made them: serve applies the streams again with
	// E2A_REPLICAS, one replica by default, and those then on the server
	// left work on, and a process whose needs are all there is rightly
	// ready (an agent's three, in one local run of three; CI's failure
	// "last answer: 200 OK {"status":"ready"}").
	serve := startStageForReadyz(t, c.URL(), map[string]string{"E2A_REPLICAS": "3"}, "serve")
	agent := startStageForReadyz(t, c.URL(), nil, "agent", "--pool", "demo")
	c.Kill(1)
	c.Kill(2)
	for _, base := range []string{serve, agent} {
		// A stream whose leader is the node left answers its info until
		// that leader sees it lost its quorum (nats-server's raft: 10 to
		// 20 s), then the check's wait and its cache: 30 s was not always
		// enough ("last answer: 200 OK {"status":"ready"}" in a helper's
		// run at load ~28, and twice in a row at load 1 to 5).
		waitReadyzWithin(t, base, http.StatusOK, `"status":"degraded"`, time.Minute)
		if _, m := httpGet(t, base+"/metrics"); !strings.Contains(m, "\ne2a_jetstream_unavailable 1\n") {
			t.Errorf("%s/metrics: no e2a_jetstream_unavailable 1", base)
		}
	}
	c.Kill(0)
	for _, base := range []string{serve, agent} {
		waitReadyz(t, base, http.StatusServiceUnavailable, `nats: `)
	}
	c.Restart(0, 1, 2)
	for _, base := range []string{serve, agent} {
		waitReadyz(t, base, http.StatusOK, `"status":"ready"`)
		if _, m := httpGet(t, base+"/metrics"); !strings.Contains(m, "\ne2a_jetstream_unavailable 0\n") {
			t.Errorf("%s/metrics: no e2a_jetstream_unavailable 0", base)
		}
	}
}
