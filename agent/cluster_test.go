package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// The in-process 3-node cluster (replicated streams, file storage) is shared
// by the cluster tests, which run one after the other.
func TestCluster(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	nc := c.Connect()
	js := natstest.JetStream(t, nc)

	// Point 2 on a replicated stream, where the server checks the
	// Nats-Msg-Id before the expected sequence: a retry is recognised by
	// its bytes, another writer's frame of the same sequence is fenced out.
	t.Run("RetryDeduplicatedAndZombieFenced", func(t *testing.T) {
		checkRetryAndFence(t, js, "cluster-fence-1")
	})

	t.Run("PublishRate", func(t *testing.T) { publishRate(t, c.Connect(), "cpr") })

	// Failover: workers on every node; the node leading E2A_RESPONSES is
	// killed while requests stream. Every request still ends with exactly
	// one final frame, gapless, without duplicates.
	t.Run("Failover", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		for i := range 3 {
			wnc, err := nats.Connect(c.ClientURLs()[i]+","+c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(wnc.Close)
			startWorker(t, wnc, "fo", demo.New(), agent.WithAckWait(2*time.Second), agent.WithMetrics(reg),
				agent.WithPublishTimeout(20*time.Second), agent.WithDrainTimeout(time.Second))
		}
		waitConsumer(t, js, "fo")
		const n = 60
		for i := range n {
			publish(t, js, "fo", request(fmt.Sprintf("fo-%d", i), map[string]any{"frames": 10, "delay_ms": 40}))
		}
		testkit.Eventually(t, 20*time.Second, "the requests streaming", func() bool {
			return metricValue(t, reg, "e2a_agent_frames_published_total", nil) >= n
		})
		leader := c.StreamLeader(streams.ResponsesStream)
		if leader < 0 {
			t.Fatal("no leader for E2A_RESPONSES")
		}
		killed := time.Now()
		c.Kill(leader)
		t.Logf("killed node %d (leader of E2A_RESPONSES) mid-stream", leader)
		for i := range n {
			id := fmt.Sprintf("fo-%d", i)
			fr := waitFinal(t, nc, id, 40*time.Second)
			if c, err := fr[len(fr)-1].Complete(); err != nil || len(fr) != 14 || c.Result.(map[string]any)["content"] != text(t, fr) {
				t.Fatalf("%s: %d frames, final %s", id, len(fr), fr[len(fr)-1].ResponseKind)
			}
		}
		t.Logf("all %d requests complete %v after the kill; redeliveries %v, outcomes succeeded %v fenced %v",
			n, time.Since(killed).Round(time.Millisecond), metricValue(t, reg, "e2a_agent_redeliveries_total", nil),
			metricValue(t, reg, "e2a_agent_requests_handled_total", map[string]string{"outcome": "succeeded"}),
			metricValue(t, reg, "e2a_agent_requests_handled_total", map[string]string{"outcome": "fenced"}))
		c.Restart(leader)
	})
}

// publishRate measures fenced frame publishing: one request writing frames
// one by one, then 64 requests in parallel.
func publishRate(t *testing.T, nc *nats.Conn, pool string) {
	serialFrames, parallel, parallelFrames := 1000, 64, 100
	if raceEnabled { // the race detector slows the in-process servers ~5×
		serialFrames, parallel, parallelFrames = 200, 16, 50
	}
	done := make(chan string, parallel)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		n := int(env.ParamInt("n", 1))
		for range n {
			if err := w.Write(e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: "text", Delta: "0123456789abcdef"}, false); err != nil {
				return err
			}
		}
		err := w.Complete(nil)
		done <- env.RequestID
		return err
	})
	js := natstest.JetStream(t, nc)
	startWorker(t, nc, pool, h, agent.WithConcurrency(parallel))
	waitConsumer(t, js, pool)
	wait := func(n int) {
		for range n {
			testkit.Receive(t, done, 60*time.Second, "requests not done after 60s")
		}
	}
	start := time.Now()
	publish(t, js, pool, request(pool+"-serial", map[string]any{"n": serialFrames}))
	wait(1)
	serial := time.Since(start)
	for i := range parallel {
		publish(t, js, pool, request(fmt.Sprintf("%s-par-%d", pool, i), map[string]any{"n": parallelFrames}))
	}
	start = time.Now() // the requests are picked up as they are published
	wait(parallel)
	par := time.Since(start)
	if fr := waitFinal(t, nc, pool+"-serial", 10*time.Second); len(fr) != serialFrames+1 {
		t.Fatalf("serial: %d frames", len(fr))
	}
	for i := range parallel {
		if fr := waitFinal(t, nc, fmt.Sprintf("%s-par-%d", pool, i), 10*time.Second); len(fr) != parallelFrames+1 {
			t.Fatalf("parallel %d: %d frames", i, len(fr))
		}
	}
	t.Logf("conflict retries so far: %d", agent.ConflictRetries())
	t.Logf("fenced frames (race detector %v): serial %d in %v = %.0f frames/s (%.0f µs each); %d requests in parallel: %d frames in %v = %.0f frames/s",
		raceEnabled, serialFrames+1, serial.Round(time.Millisecond), float64(serialFrames+1)/serial.Seconds(), serial.Seconds()*1e6/float64(serialFrames+1),
		parallel, parallel*(parallelFrames+1), par.Round(time.Millisecond), float64(parallel*(parallelFrames+1))/par.Seconds())
}

func TestPublishRateSingleServer(t *testing.T) {
	s := startServer(t)
	publishRate(t, s.nc, "spr")
}
