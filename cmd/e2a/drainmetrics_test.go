package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestAgentMetricsServedThroughDrain: a stopping `e2a agent` (SIGTERM: its
// context ends) serves /metrics on E2A_HTTP_ADDR until it exits, while it
// drains its in-flight requests, so that Prometheus scrapes the drain's
// counters; its /readyz answers 503 "stopping" meanwhile, its /healthz
// 200. The operations listener closed as the drain began: /metrics was
// gone for the whole drain (up to E2A_AGENT_DRAIN_TIMEOUT) unless
// E2A_METRICS_ADDR gave it a listener of its own. An HTTP agent holds
// the request's answer until the test has scraped.
func TestAgentMetricsServedThroughDrain(t *testing.T) {
	emb, nc := natstest.RunServer(t)
	p := pipetest.Start(t, pipetest.WithConn(nc))
	called, release := make(chan struct{}, 1), make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			called <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"reply":"done"}`))
	}))
	defer upstream.Close()
	releaseOnce := sync.OnceFunc(func() { close(release) })
	defer releaseOnce()
	port := strconv.Itoa(natstest.FreePorts(t, 1)[0])
	cfg := configWith(t, "E2A_NATS_URL="+emb.ClientURL(), "E2A_HTTP_ADDR=127.0.0.1:"+port, "E2A_METRICS_ADDR=", "E2A_LOG_LEVEL=error",
		"E2A_AGENT_DRAIN_TIMEOUT=60s")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runAgent(ctx, cfg, []string{"--pool", "held", "--http", upstream.URL}) }()
	base := "http://127.0.0.1:" + port
	waitReadyz(t, base, http.StatusOK, "")

	resp, body := testkit.Do(t, "POST", p.URL+"/pools/held/v1/requests", `{"request_id":"held-1","params":{"text":"hi"}}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %s", resp.StatusCode, body)
	}
	testkit.Receive(t, called, 20*time.Second, "the agent called with the request")
	cancel() // SIGTERM: the worker drains the request the agent holds
	client := &http.Client{Timeout: 5 * time.Second}
	if !testkit.Until(30*time.Second, func() bool {
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			return true
		}
		resp.Body.Close()
		return resp.StatusCode != http.StatusOK
	}) {
		t.Fatal("/readyz still 200 30 s after the stop began")
	}
	code, metrics := httpGet(t, base+"/metrics")
	if code != http.StatusOK || !strings.Contains(metrics, `e2a_agent_in_flight{pool="held"} 1`) {
		t.Fatalf("/metrics while the worker drains: %d, e2a_agent_in_flight %q", code, firstLineWith(metrics, "e2a_agent_in_flight{"))
	}
	waitReadyz(t, base, http.StatusServiceUnavailable, `"stopping"`)
	if code, body := httpGet(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while the worker drains: %d %s", code, body)
	}
	releaseOnce()
	if err := testkit.Receive(t, done, 30*time.Second, "e2a agent stopped once its request ended"); err != nil {
		t.Fatalf("e2a agent: %v", err)
	}
	resp, body = testkit.Do(t, "GET", p.URL+"/v1/requests/held-1?wait=true", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "succeeded") {
		t.Errorf("the drained request: %d %s; want it finished by the stopping worker", resp.StatusCode, body)
	}
}

// firstLineWith is the first line of s holding sub ("" when none).
func firstLineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
