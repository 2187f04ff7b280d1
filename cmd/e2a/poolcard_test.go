package main

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestPoolCardFollowsAgentCard: a bridged A2A pool's card follows the
// agent's card read again every so often (a skill added shows on the pool's
// card without a restart); a card that cannot be read keeps the pool's last
// one; an unchanged card is not published again before the TTL's third.
func TestPoolCardFollowsAgentCard(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	conv, err := bridge.OpenConversations(ctx, js, natstest.Config())
	if err != nil {
		t.Fatal(err)
	}
	start := bridge.PoolInfo{Pool: "travel", Kind: upstreamA2A, Upstream: "http://agent", Name: "Travel", Streaming: true}
	if err := conv.PublishPool(ctx, start); err != nil {
		t.Fatal(err)
	}
	var step atomic.Int32 // 0: unchanged, 1: a skill added, 2: the card unreadable
	var reads atomic.Int32
	skilled := start
	skilled.Skills = []map[string]any{{"id": "book", "name": "Book a trip"}}
	keep := poolCard{conv: conv, info: start, ttl: time.Hour, every: 10 * time.Millisecond, log: slog.New(slog.DiscardHandler),
		refresh: func(context.Context) (bridge.PoolInfo, error) {
			reads.Add(1)
			switch step.Load() {
			case 1:
				return skilled, nil
			case 2:
				return bridge.PoolInfo{}, errors.New("connection refused")
			}
			return start, nil
		}}
	go keep.run(ctx)

	skills := func() int {
		info, found, err := bridge.LookupPool(ctx, js, "travel")
		if err != nil || !found {
			t.Fatalf("pool card: found %v, %v", found, err)
		}
		return len(info.Skills)
	}
	rev := func() uint64 { return poolCardRevision(t, js, "travel") }
	before := rev()
	testkit.Eventually(t, 10*time.Second, "the card read again", func() bool { return reads.Load() >= 5 })
	if got := rev(); got != before {
		t.Errorf("an unchanged card was published again: revision %d, was %d", got, before)
	}
	step.Store(1)
	testkit.Eventually(t, 10*time.Second, "the added skill on the pool's card", func() bool { return skills() == 1 })
	step.Store(2)
	n := reads.Load()
	testkit.Eventually(t, 10*time.Second, "the card read (and failed) again", func() bool { return reads.Load() >= n+3 })
	if got := skills(); got != 1 {
		t.Errorf("an unreadable card changed the pool's: %d skills", got)
	}
}

// poolCardRevision is the revision of pool's card in E2A_BRIDGE.
func poolCardRevision(t *testing.T, js jetstream.JetStream, pool string) uint64 {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), streams.BridgeBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(context.Background(), "pool."+pool)
	if err != nil {
		t.Fatal(err)
	}
	return e.Revision()
}
