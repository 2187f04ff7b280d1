package agent_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestGiveUpHeartbeats: the give-up delivery (past WithMaxDeliver) is held
// with heartbeats while its final max_deliveries frame is written, as a
// handler's is. It was not registered: a give-up slower than AckWait (its
// reads and fenced retries take up to seconds) expired, and the server
// sent the max-deliveries advisory, on which every worker of the pool
// closed the request again (or, on a consumer with more deliveries, gave
// it to another worker to give up on at the same time).
//
// The give-up's final frame is held in its publish (WithBeforeBurst)
// until the advisory comes or three AckWaits have passed.
func TestGiveUpHeartbeats(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const pool, id = "giveuphb", "giveuphb-1"
	consumer, _ := streams.AgentConsumerName(pool)
	advs := make(chan *nats.Msg, 4)
	sub, err := s.nc.ChanSubscribe(subjects.MaxDeliveriesAdvisory(streams.RequestsStream, consumer), advs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	picked := make(chan struct{}, 1)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		picked <- struct{}{}
		<-ctx.Done() // the poison request: the process dies in it
		return ctx.Err()
	})
	opts := []agent.Option{agent.WithAckWait(time.Second), agent.WithMaxDeliver(1)}
	ncA := s.connect(t)
	startWorker(t, ncA, pool, h, opts...)
	waitConsumer(t, s.js, pool)
	publish(t, s.js, pool, request(id, nil))
	testkit.Receive(t, picked, 10*time.Second, "no pick-up")
	ncA.Close() // its delivery runs out: the next one is the give-up

	var calls atomic.Int32
	var expired atomic.Bool
	hookDone := make(chan struct{})
	hold := agent.WithBeforeBurst(func(string, int64, int) {
		if calls.Add(1) != 1 {
			return // a close the advisory started
		}
		defer close(hookDone)
		select {
		case <-advs:
			expired.Store(true)
		case <-time.After(3 * time.Second):
		}
	})
	startWorker(t, s.connect(t), pool, h, append(opts, hold)...)
	testkit.Receive(t, hookDone, 20*time.Second, "the give-up did not write")
	fr := waitFinal(t, s.nc, id, 15*time.Second)
	if b, err := fr[len(fr)-1].Error(); err != nil || b.Code != e2a.ErrCodeMaxDeliveries {
		t.Fatalf("final frame %+v %v, want e2a.error max_deliveries", b, err)
	}
	if expired.Load() {
		t.Fatal("the give-up delivery expired while its final frame was written: the server sent the max-deliveries advisory")
	}
}
