package deploy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestPoolCheckBoundedWhileConsumerLeaderSilent: ingress's pool check (a
// lookup of the pool's consumer, which only adds a warning or refuses a
// pool that never had a worker, and lets the request through when it
// fails) is bounded at 1 s, not the JetStream API's 5 s. With the server
// leading the pool's consumer frozen (SIGSTOP: nothing answers, nothing
// closes), every lookup went unanswered for 5 s before the request was
// even published, while E2A_REQUESTS, led elsewhere, stored it at once:
// an E2A POST took 5 s to be accepted, and up to 10 s to be refused when
// E2A_REQUESTS had no leader either (seen by hand on three nats-server
// processes: POSTs answered after 7.9 s, or not within a client's 8 s,
// while one server was frozen).
func TestPoolCheckBoundedWhileConsumerLeaderSilent(t *testing.T) {
	c, ctx, _, _ := provisionedCluster(t, 90*time.Second, nil)
	z, err := c.nodes[0].jsz()
	if err != nil || z.Meta == nil {
		t.Fatalf("jsz: %v", err)
	}
	// The front's connection is on the meta leader, which stays.
	keep := c.node(z.Meta.Leader)
	if keep == nil {
		t.Fatalf("no meta leader node %q", z.Meta.Leader)
	}
	nc, _ := c.connectNode("admin", keep)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	leader := streamLeader(t, ctx, js, streams.RequestsStream)
	var victim *natsNode
	for _, nd := range c.nodes {
		if nd != keep && nd.name != leader {
			victim = nd
		}
	}
	if victim == nil {
		// The meta leader leads E2A_REQUESTS: either other server will do.
		victim = c.nodes[0]
		if victim == keep {
			victim = c.nodes[1]
		}
	}
	cfg, err := streams.AgentConsumerConfig("far", 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, streams.RequestsStream, cfg); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the consumer's leader on "+victim.name, func() bool {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		cons, err := js.Consumer(cctx, streams.RequestsStream, cfg.Durable)
		if err != nil || cons.CachedInfo().Cluster == nil || cons.CachedInfo().Cluster.Leader == "" {
			return false // electing
		}
		if cons.CachedInfo().Cluster.Leader == victim.name {
			return true
		}
		req, _ := json.Marshal(map[string]any{"placement": map[string]any{"preferred": victim.name}})
		_, _ = nc.RequestWithContext(cctx, "$JS.API.CONSUMER.LEADER.STEPDOWN."+streams.RequestsStream+"."+cfg.Durable, req)
		return false
	})
	if victim.name == streamLeader(t, ctx, js, streams.RequestsStream) {
		t.Skipf("E2A_REQUESTS's leader moved to %s", victim.name)
	}
	srv := pipetest.ServeFront(t, nc, nil, ingress.WithPoolCheck(time.Hour))
	t.Cleanup(srv.Egress.Close)

	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = victim.cmd.Process.Signal(syscall.SIGCONT) })
	start := time.Now()
	resp, err := http.Post(srv.URL+"/v1/requests?agent=far", "application/json", strings.NewReader(`{"params":{"text":"hi"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	t.Logf("answered %d in %v: %s", resp.StatusCode, took.Round(time.Millisecond), b)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST while the consumer's leader is frozen: %d %s", resp.StatusCode, b)
	}
	if took > 3500*time.Millisecond {
		t.Errorf("POST accepted after %v: the pool check waited for the frozen consumer leader", took.Round(time.Millisecond))
	}
}
