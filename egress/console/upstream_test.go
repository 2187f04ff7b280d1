package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestStatsNameUpstream: the console's consumers name a bridge pool's
// upstream as its bridge published it, and only a bridge pool's.
func TestStatsNameUpstream(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, pipelineOptions{})
	ctx := context.Background()
	js := natstest.JetStream(t, p.nc)
	conv, err := bridge.OpenConversations(ctx, js, streams.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := conv.PublishPool(ctx, bridge.PoolInfo{Pool: "demo", Kind: "openai", Upstream: "http://models.internal:8000"}); err != nil {
		t.Fatal(err)
	}
	// The demo pool's worker creates its consumer as it starts: the stats
	// name it once it exists.
	var st console.Stats
	testkit.Eventually(t, 10*time.Second, "the agent-demo consumer in the console's stats", func() bool {
		_, b := p.do(t, "GET", "/console/api/stats", "")
		st = decode[console.Stats](t, b)
		for _, c := range st.Consumers {
			if c.Name == "agent-demo" {
				return true
			}
		}
		return false
	})
	found := false
	for _, c := range st.Consumers {
		switch {
		case c.Name == "agent-demo":
			found = true
			if c.Upstream != "openai http://models.internal:8000" {
				t.Errorf("agent-demo upstream %q", c.Upstream)
			}
		case c.Upstream != "":
			t.Errorf("consumer %s names an upstream %q", c.Name, c.Upstream)
		}
	}
	if !found {
		t.Fatalf("no agent-demo consumer: %+v", st)
	}
}

// TestStatsUpstreamWithoutAddress: a pool whose bridge info names a kind
// and no address (the built-in tck-basic: kind "builtin") reads
// "builtin", not "builtin " with a trailing space.
func TestStatsUpstreamWithoutAddress(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, pipelineOptions{})
	ctx := context.Background()
	conv, err := bridge.OpenConversations(ctx, natstest.JetStream(t, p.nc), streams.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := conv.PublishPool(ctx, bridge.PoolInfo{Pool: "demo", Kind: "builtin", Name: "built in"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the agent-demo consumer, upstream \"builtin\"", func() bool {
		_, b := p.do(t, "GET", "/console/api/stats", "")
		for _, c := range decode[console.Stats](t, b).Consumers {
			if c.Name == "agent-demo" {
				if c.Upstream != "builtin" {
					t.Fatalf("agent-demo upstream %q, want \"builtin\"", c.Upstream)
				}
				return true
			}
		}
		return false
	})
}
