package bridge

import (
	"context"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestConversationUpdateWaitsForTheBucketsLeader: a turn is recorded
// while E2A_BRIDGE has no leader (two of three NATS nodes down; a node's
// crash leaves it so for the cluster's election, seconds) and the nodes
// come back within the update's deadline. The update is written once the
// bucket answers again. It failed at once ("bridge: conversation: nats: no
// responders available for request"), and the a2a bridge then only logged
// that the turn's upstream ids were not recorded, so that the
// conversation's next turn could not find its upstream task.
func TestConversationUpdateWaitsForTheBucketsLeader(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The store's connection is to the node kept up: a client of a node
	// killed waits for its reconnect instead, and may meet the bucket with
	// a leader again.
	const up = 0
	nc, err := c.Node(up).Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cfg := natstest.Config()
	cfg.Replicas = c.Size() // as streams.Apply makes the buckets on the cluster
	convs, err := OpenConversations(ctx, natstest.JetStream(t, nc), cfg)
	if err != nil {
		t.Fatal(err)
	}
	env := &e2a.Envelope{RequestID: "r1", UserID: "alice", ContextID: "ctx-1"}
	if err := convs.Update(ctx, "p", env, func(*Conversation) {}); err != nil {
		t.Fatal(err)
	}
	down := c.Leaderless(streams.KVStream(streams.BridgeBucket), up)
	next := &e2a.Envelope{RequestID: "r2", UserID: "alice", ContextID: "ctx-1"}
	uctx, ucancel := context.WithTimeout(ctx, 30*time.Second)
	defer ucancel()
	updated := make(chan error, 1)
	start := time.Now()
	go func() {
		updated <- convs.Update(uctx, "p", next, func(conv *Conversation) { conv.UpstreamTaskID = "up-2" })
	}()
	c.Restart(down...)
	err = testkit.Receive(t, updated, 40*time.Second, "the update did not return")
	took := time.Since(start)
	if err != nil {
		t.Fatalf("update while the bucket had no leader, the nodes back within its deadline: %v", err)
	}
	t.Logf("written %v after the update began", took.Round(time.Millisecond))
	c.WaitStreamsSynced(streams.KVStream(streams.BridgeBucket)) // a direct get may be answered by any replica
	conv, _, err := convs.Get(ctx, "p", next)
	if err != nil || conv.UpstreamTaskID != "up-2" || len(conv.RequestIDs) != 2 {
		t.Fatalf("the conversation after the update: %+v %v", conv, err)
	}
}
