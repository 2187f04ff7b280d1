package streams_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestPresenceDeadWorkerHoldingARequest: a pool's only worker took a
// request and died (killed, its connection gone) before acking it. No pull
// waits any more, but the delivery stays in the consumer's NumAckPending
// (the server keeps it pending for the next puller, however long none
// comes): the pool reads as not live once the grace has passed, so
// /readyz, the pool check and the console say "no live worker" (found by
// review: Presence counted held requests as a live worker, for good).
func TestPresenceDeadWorkerHoldingARequest(t *testing.T) {
	_, nc := natstest.RunServer(t, natstest.WithoutStreams())
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "REQ", Subjects: []string{"req.>"}}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "REQ", jetstream.ConsumerConfig{Durable: "agent-demo",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 200 * time.Millisecond, MaxDeliver: 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "req.demo.r1", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	// The worker's one pull: it takes the request and is never heard of
	// again (no ack, no further pull).
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range batch.Messages() {
	}
	p := streams.NewPresence(300 * time.Millisecond)
	var last *jetstream.ConsumerInfo
	t.Cleanup(func() {
		if t.Failed() && last != nil {
			t.Logf("last reading: NumWaiting %d, NumAckPending %d, NumRedelivered %d: Live %v",
				last.NumWaiting, last.NumAckPending, last.NumRedelivered, p.Live("demo", last))
		}
	})
	testkit.Eventually(t, 5*time.Second, "the pool with no worker left read as not live (AckWait 200ms, grace 300ms)", func() bool {
		ci, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		last = ci
		return !p.Live("demo", ci)
	})
}
