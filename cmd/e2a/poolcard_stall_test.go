package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestStalledCardReadKeepsRepublishing: an agent (or a proxy in front of
// it) that sends its card's headers then stalls must not stop the pool's
// card being republished at the TTL's third (it would expire from
// E2A_BRIDGE, and the pool's card from every ingress, although nothing
// changed): each read of the agent's card is bounded by the interval
// between reads.
func TestStalledCardReadKeepsRepublishing(t *testing.T) {
	agentSrv := up.Start(t, up.Options{})
	resp, err := http.Get(agentSrv.CardURL())
	if err != nil {
		t.Fatal(err)
	}
	card, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var reads atomic.Int32
	stop := make(chan struct{})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if reads.Add(1) == 1 {
			_, _ = w.Write(card) // the card as read at start
			return
		}
		// Later reads: the headers and the start of the card, then nothing.
		_, _ = w.Write(card[:len(card)/2])
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer front.Close()
	defer close(stop)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client, err := bridge.NewClient(front.URL, bridge.WithIdleTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := a2abridge.New(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	conv, err := bridge.OpenConversations(ctx, js, natstest.Config())
	if err != nil {
		t.Fatal(err)
	}
	info := bridge.PoolInfo{Pool: "travel", Kind: upstreamA2A, Upstream: client.Name(), Streaming: true}
	describeA2A(&info, upstream.Card())
	if err := conv.PublishPool(ctx, info); err != nil {
		t.Fatal(err)
	}
	rev := func() uint64 { return poolCardRevision(t, js, "travel") }
	before := rev()
	// TTL 300ms: republished every 100ms; the card read every 20ms (as
	// newBridge's refresh does it).
	keep := poolCard{conv: conv, info: info, ttl: 300 * time.Millisecond, every: 20 * time.Millisecond, log: slog.New(slog.DiscardHandler),
		refresh: func(ctx context.Context) (bridge.PoolInfo, error) {
			c, err := upstream.ReadCard(ctx)
			if err != nil {
				return bridge.PoolInfo{}, err
			}
			n := bridge.PoolInfo{Pool: "travel", Kind: upstreamA2A, Upstream: client.Name(), Streaming: true}
			describeA2A(&n, c)
			return n, nil
		}}
	go keep.run(ctx)
	testkit.Eventually(t, 10*time.Second, "the agent's card read again (stalling)", func() bool { return reads.Load() >= 2 })
	testkit.Eventually(t, 5*time.Second, "the unchanged pool card republished (TTL 300ms, every 100ms) while the agent's card read stalls",
		func() bool { return rev() > before+1 })
}
