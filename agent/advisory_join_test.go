package agent_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestRunAwaitsMaxDeliveriesAdvisory: Run returns only after the close a
// max-deliveries advisory started has ended. Its goroutine was not
// awaited: Run returned while it still read, published and logged.
//
// The advisory's final frame is held in its publish (WithBeforeBurst)
// until Run has returned or, Run waiting for it, for a second: held past
// Run's return is the defect, whatever the time Run takes.
func TestRunAwaitsMaxDeliveriesAdvisory(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const pool, id = "advjoin", "advjoin-1"
	started, release := make(chan struct{}), make(chan struct{})
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		close(started) // the worker listens to the advisory now
		<-release
		return nil
	})
	entered, hookDone, returned := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var heldPastRun bool
	var calls atomic.Int32
	hold := agent.WithBeforeBurst(func(string, int64, int) {
		if calls.Add(1) != 1 {
			return // the handler's final frame
		}
		// The advisory's final frame: the handler has written nothing.
		defer close(hookDone)
		close(entered)
		select {
		case <-returned:
			heldPastRun = true
		case <-time.After(time.Second):
		}
	})
	wk := startWorker(t, s.connect(t), pool, h, hold)
	waitConsumer(t, s.js, pool)
	publish(t, s.js, pool, request(id, nil))
	testkit.Receive(t, started, 10*time.Second, "the handler did not start")
	reqSubj, _ := subjects.Request(pool, id)
	req, err := streams.LastBySubject(tctx(t), s.nc, streams.RequestsStream, reqSubj)
	if err != nil {
		t.Fatal(err)
	}
	consumer, _ := streams.AgentConsumerName(pool)
	adv, _ := json.Marshal(map[string]any{"stream": streams.RequestsStream, "consumer": consumer,
		"stream_seq": req.Seq, "deliveries": 3})
	if err := s.nc.Publish(subjects.MaxDeliveriesAdvisory(streams.RequestsStream, consumer), adv); err != nil {
		t.Fatal(err)
	}
	testkit.Receive(t, entered, 10*time.Second, "the advisory's close did not publish")
	close(release) // the handler ends the request; the advisory's write is fenced
	waitFinal(t, s.nc, id, 10*time.Second)
	if err := wk.stop(); err != nil {
		t.Fatal(err)
	}
	close(returned)
	testkit.Receive(t, hookDone, 10*time.Second, "the advisory's publish did not end")
	if heldPastRun {
		t.Fatal("Run returned while the max-deliveries advisory's close was still publishing")
	}
}
