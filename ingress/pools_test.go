package ingress_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestPoolCheck: with the pool check on (as `e2a dev` and `e2a serve` run),
// a request for a pool no worker ever served is refused in each protocol's
// shape and nothing is published; a pool whose consumer exists but has no
// worker pulling is accepted with a warning; a live pool without one.
func TestPoolCheck(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	reg := prometheus.NewRegistry()
	srv := pipetest.ServeFront(t, nc, []egress.Option{egress.WithRegisterer(reg)}, ingress.WithRegisterer(reg), ingress.WithPoolCheck(time.Hour))
	t.Cleanup(srv.Egress.Close)
	in := srv.Ingress
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stored := func() uint64 {
		st, err := js.Stream(ctx, streams.RequestsStream)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().State.Msgs
	}
	post := func(path, body string) (int, http.Header, string) {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}

	// Unknown: refused everywhere, nothing stored.
	if code, _, b := post("/v1/requests?agent=nopool", `{"params":{"text":"hi"}}`); code != 404 || !strings.Contains(b, `"code":"unknown_agent"`) ||
		!strings.Contains(b, `\"nopool\"`) || !strings.Contains(b, `"retryable":false`) {
		t.Errorf("E2A unknown pool: %d %s", code, b)
	}
	if _, _, b := post("/a2a?agent=nopool", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m1","parts":[{"kind":"text","text":"hi"}]}}}`); !strings.Contains(b, `"code":-32602`) || !strings.Contains(b, "unknown agent pool") {
		t.Errorf("A2A unknown pool: %s", b)
	}
	if _, _, b := post("/a2e?agent=nopool", `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r1","text":"hi"}`+"\n"); !strings.Contains(b, `"unknown_agent"`) {
		t.Errorf("A2E unknown pool: %s", b)
	}
	if n := stored(); n != 0 {
		t.Fatalf("%d requests stored for an unknown pool", n)
	}

	// Known, no worker pulling: accepted with a warning.
	cfg, err := streams.AgentConsumerConfig("idle", 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, streams.RequestsStream, cfg); err != nil {
		t.Fatal(err)
	}
	code, h, b := post("/v1/requests?agent=idle", `{"params":{"text":"hi"}}`)
	if code != 202 || !strings.Contains(b, `"warning":"agent pool \"idle\" has no live worker`) || h.Get(ingress.HeaderWarning) == "" {
		t.Errorf("idle pool: %d %q %s", code, h.Get(ingress.HeaderWarning), b)
	}

	// Live: a worker is pulling.
	actx, acancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = agent.Run(actx, nc, "demo", demo.New(), agent.WithMetrics(prometheus.NewRegistry()))
	}()
	t.Cleanup(func() { acancel(); <-done })
	waitPulling(t, ctx, js, "demo")
	if pools, err := in.Pools(ctx); err != nil || pools["idle"] != "no live worker" || pools["demo"] != "live" {
		t.Errorf("pools %v %v", pools, err)
	}
	code, h, b = post("/v1/requests?agent=demo&wait=true", `{"params":{"text":"hi","frames":1}}`)
	if code != 200 || strings.Contains(b, "warning") || h.Get(ingress.HeaderWarning) != "" || !strings.Contains(b, `"state":"succeeded"`) {
		t.Errorf("live pool: %d %q %s", code, h.Get(ingress.HeaderWarning), b)
	}
}

// waitPulling waits until a worker of pool has a pull request waiting.
func waitPulling(t *testing.T, ctx context.Context, js jetstream.JetStream, pool string) {
	t.Helper()
	name, _ := streams.AgentConsumerName(pool)
	for {
		if c, err := js.Consumer(ctx, streams.RequestsStream, name); err == nil && c.CachedInfo().NumWaiting > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no worker of pool %s is pulling", pool)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestPoolCheckSeesWorkerStart: a request for a known pool without a live
// worker is warned, and once a worker of it pulls the next request is not,
// within the cache's ttl: the pool check cached "no live worker" as it
// caches a live pool, so every request for the ttl after a worker started
// (or after one reading between a live worker's pulls) said the pool had
// none.
func TestPoolCheckSeesWorkerStart(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	srv := pipetest.ServeFront(t, nc, nil, ingress.WithPoolCheck(time.Hour))
	t.Cleanup(srv.Egress.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	post := func() (http.Header, string) {
		resp, err := http.Post(srv.URL+"/v1/requests?agent=late", "application/json", strings.NewReader(`{"params":{"text":"hi","frames":1}}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.Header, string(b)
	}
	cfg, err := streams.AgentConsumerConfig("late", 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, streams.RequestsStream, cfg); err != nil {
		t.Fatal(err)
	}
	if h, b := post(); h.Get(ingress.HeaderWarning) == "" || !strings.Contains(b, "no live worker") {
		t.Fatalf("before its worker: %q %s, want the warning", h.Get(ingress.HeaderWarning), b)
	}
	actx, acancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = agent.Run(actx, nc, "late", demo.New(), agent.WithMetrics(prometheus.NewRegistry()))
	}()
	t.Cleanup(func() { acancel(); <-done })
	waitPulling(t, ctx, js, "late")
	if h, b := post(); h.Get(ingress.HeaderWarning) != "" || strings.Contains(b, "warning") {
		t.Fatalf("with its worker pulling: %q %s, want no warning", h.Get(ingress.HeaderWarning), b)
	}
}
