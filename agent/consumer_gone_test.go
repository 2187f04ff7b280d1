package agent_test

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// A pool's consumer deleted under its worker (an operator's `nats consumer
// rm`, a restored stream) is made again by the worker with the start-up
// configuration: a request stored after the deletion is served, and one
// answered before it is not served again (the new consumer delivers the
// stream's requests from the start, and the answered one is only acked).
func TestDeletedConsumerIsMadeAgain(t *testing.T) {
	s := startServer(t)
	const pool = "regone"
	var mu sync.Mutex
	served := map[string]int{}
	h := agent.HandlerFunc(func(_ context.Context, env *e2a.Envelope, w agent.Writer) error {
		mu.Lock()
		served[env.RequestID]++
		mu.Unlock()
		return w.Complete(map[string]any{"ok": true})
	})
	startWorker(t, s.nc, pool, h)
	waitConsumer(t, s.js, pool)
	publish(t, s.js, pool, request("req-before", nil))
	waitFinal(t, s.nc, "req-before", 10*time.Second)

	ctx := tctx(t)
	name, _ := streams.AgentConsumerName(pool)
	c, err := s.js.Consumer(ctx, streams.RequestsStream, name)
	if err != nil {
		t.Fatal(err)
	}
	want := c.CachedInfo().Config
	if err := s.js.DeleteConsumer(ctx, streams.RequestsStream, name); err != nil {
		t.Fatal(err)
	}
	publish(t, s.js, pool, request("req-gap", nil))
	waitFinal(t, s.nc, "req-gap", 15*time.Second)

	c, err = s.js.Consumer(ctx, streams.RequestsStream, name)
	if err != nil {
		t.Fatalf("consumer %s after the gap: %v", name, err)
	}
	if got := c.CachedInfo().Config; !reflect.DeepEqual(got, want) {
		t.Errorf("consumer made again with\n%+v\nwant the start-up config\n%+v", got, want)
	}
	// Both requests were delivered by the new consumer and acked.
	testkit.Eventually(t, 10*time.Second, "every request acked by the new consumer", func() bool {
		ci, err := c.Info(ctx)
		return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0 && ci.AckFloor.Stream >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	if served["req-before"] != 1 || served["req-gap"] != 1 {
		t.Errorf("handler runs %v, want each request served once", served)
	}
}
