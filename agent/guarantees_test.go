package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestGivenUpWithNoWorkerRunning: a request whose last delivery runs out
// while no worker of the pool runs (the poison request killed the pool's
// one worker, restarted after its AckWait) is given up with max_deliveries
// by the worker that starts next. It hung for good ("No request hangs"):
// the server's max-deliveries advisory, sent once to whoever listened then,
// was the only trigger.
func TestGivenUpWithNoWorkerRunning(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const pool, id = "rvadv", "rvadv-1"
	name, _ := streams.AgentConsumerName(pool)
	opts := []agent.Option{agent.WithAckWait(time.Second), agent.WithMaxDeliver(1)}
	startPoisoned(t, s, pool, id, opts...)
	// Its delivery runs out with no worker running: the server takes it
	// back (to deliver again, or as the last one, for good).
	cons, err := s.js.Consumer(context.Background(), streams.RequestsStream, name)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, "the delivery's AckWait ran out", func() bool {
		// By the server's clock: its info's time is past the last
		// delivery's AckWait (1 s), with a margin for its expiry check.
		ci, err := cons.Info(context.Background())
		return err == nil && ci.Delivered.Last != nil && ci.TimeStamp.Sub(*ci.Delivered.Last) > 2*time.Second
	})
	// The worker is back (its supervisor restarted it).
	startWorker(t, s.connect(t), pool, demo.New(), opts...)
	fr := waitFinal(t, s.nc, id, 15*time.Second)
	f := fr[len(fr)-1]
	if b, err := f.Error(); err != nil || b.Code != e2a.ErrCodeMaxDeliveries {
		t.Fatalf("final frame %s %+v %v, want e2a.error max_deliveries", f.ResponseKind, b, err)
	}
}

// TestMaxDeliverOutOfRangeIsInvalidOption: WithMaxDeliver past 99 (the
// consumer takes at most 100 deliveries, one of them the give-up one) is
// ErrInvalidOption. It took any n ≥ 1: Run then failed with
// streams.ErrInvalidOptions, and for a huge n panicked building the
// per-delivery back-off (make of n durations).
func TestMaxDeliverOutOfRangeIsInvalidOption(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	steps := make([]time.Duration, 101)
	for i := range steps {
		steps[i] = time.Second
	}
	cases := map[string][]agent.Option{
		"max deliver 100":    {agent.WithMaxDeliver(100)},
		"max deliver 101":    {agent.WithMaxDeliver(101)},
		"max deliver MaxInt": {agent.WithMaxDeliver(math.MaxInt)},
		"101 back-off steps": {agent.WithMaxDeliver(102), agent.WithBackOff(steps...)},
		"max deliver 1<<20":  {agent.WithMaxDeliver(1 << 20)},
	}
	for name, opts := range cases {
		err := runRecovered(s, "rvopts", opts)
		if !errors.Is(err, agent.ErrInvalidOption) {
			t.Errorf("%s: Run returned %v, want an error wrapping ErrInvalidOption", name, err)
		}
	}
}

// runRecovered runs agent.Run for at most 3 s and returns its error, or its
// panic as an error.
func runRecovered(s *server, pool string, opts []agent.Option) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return agent.Run(ctx, s.nc, pool, demo.New(), opts...)
}

// TestConcurrencyBoundWithTurns: WithConcurrency bounds the handlers
// running at once, with later turns in the mix (a waiting turn gives its slot back and
// takes one again before it runs): 3 slots, 12 requests of which 4 are turns
// after another request, released one at a time; at most 3 run at once.
func TestConcurrencyBoundWithTurns(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const pool, n, limit = "rvconc", 12, 3
	var cur, peak atomic.Int32
	var running, finished sync.Map
	release := make(chan struct{})
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		running.Store(env.RequestID, true)
		defer running.Delete(env.RequestID)
		c := cur.Add(1)
		for p := peak.Load(); c > p && !peak.CompareAndSwap(p, c); p = peak.Load() {
		}
		defer cur.Add(-1)
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		err := w.Complete("ok")
		finished.Store(env.RequestID, true)
		return err
	})
	// runnable is how many requests can run now: those not finished whose
	// turn is not waiting for a request still running (a turn after one
	// released last waits for it: the count is not simply what is left).
	runnable := func() int {
		k := 0
		for i := range n {
			if _, done := finished.Load(fmt.Sprintf("rvconc-%d", i)); done {
				continue
			}
			if i%3 == 2 {
				if _, done := finished.Load(fmt.Sprintf("rvconc-%d", i-2)); !done {
					continue
				}
			}
			k++
		}
		return k
	}
	// A long AckWait: on a loaded machine a late heartbeat would redeliver a
	// held request and change the count (not what this test is about).
	startWorker(t, s.connect(t), pool, h, agent.WithConcurrency(limit), agent.WithAckWait(30*time.Second))
	waitConsumer(t, s.js, pool)
	for i := range n {
		env := request(fmt.Sprintf("rvconc-%d", i), nil)
		if i%3 == 2 {
			publishAfter(t, s.js, pool, env, fmt.Sprintf("rvconc-%d", i-2))
		} else {
			publish(t, s.js, pool, env)
		}
	}
	for done := range n {
		deadline := time.Now().Add(10 * time.Second)
		for cur.Load() != int32(min(limit, runnable())) && cur.Load() <= limit {
			if time.Now().After(deadline) {
				var ids []any
				running.Range(func(k, _ any) bool { ids = append(ids, k); return true })
				t.Fatalf("after %d releases: %d handlers run (%v), want %d", done, cur.Load(), ids, min(limit, runnable()))
			}
			<-time.After(5 * time.Millisecond) // a poll, as testkit.Eventually's
		}
		if p := peak.Load(); p > limit {
			t.Fatalf("%d handlers ran at once with WithConcurrency(%d)", p, limit)
		}
		release <- struct{}{}
	}
	for i := range n {
		waitFinal(t, s.nc, fmt.Sprintf("rvconc-%d", i), 10*time.Second)
	}
	if p := peak.Load(); p > limit {
		t.Fatalf("%d handlers ran at once with WithConcurrency(%d)", p, limit)
	}
}

// TestNoGoroutineLeftAfterRun: once Run has returned, the goroutines it
// started
// (fetch loop, heartbeats, cancel re-reads, subscriptions, writers, turn
// listeners, advisory handlers) are gone: a second worker's life on a
// provisioned consumer, with completed, cancelled, turn-waiting and
// handed-back requests, leaves the goroutines running the package's code
// and its connection's subscriptions where they were. (A count of every
// goroutine included the embedded server's, which it starts for its own
// work at its own pace: CI on 9207a6c7 counted five more, a consumer's
// and a stream source's, once the first worker's stop no longer waited
// for its pull.)
func TestNoGoroutineLeftAfterRun(t *testing.T) {
	s := startServer(t)
	const pool = "rvleak"
	nc := s.connect(t)
	first := startWorker(t, nc, pool, demo.New())
	waitConsumer(t, s.js, pool)
	publish(t, s.js, pool, request("rvleak-0", map[string]any{"frames": 2}))
	waitFinal(t, s.nc, "rvleak-0", 10*time.Second)
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	// Goroutines of earlier tests may still be ending: counted too.
	base, _ := agentGoroutines()
	subs := nc.NumSubscriptions()

	hold := make(chan struct{})
	var once sync.Once
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if env.RequestID == "rvleak-held" {
			once.Do(func() { close(hold) })
			<-ctx.Done()
			return ctx.Err()
		}
		return demo.New().Serve(ctx, env, w)
	})
	w := startWorker(t, nc, pool, h, agent.WithDrainTimeout(200*time.Millisecond), agent.WithCoalesce(64, 50*time.Millisecond))
	publish(t, s.js, pool, request("rvleak-1", map[string]any{"frames": 4}))
	waitFinal(t, s.nc, "rvleak-1", 10*time.Second)
	publish(t, s.js, pool, request("rvleak-held", nil))
	<-hold
	if n, _ := agentGoroutines(); n <= base || nc.NumSubscriptions() <= subs {
		t.Fatalf("a running worker shows %d goroutines running the package's code (%d before), %d subscriptions (%d before): the check sees nothing", n, base, nc.NumSubscriptions(), subs)
	}
	publishAfter(t, s.js, pool, request("rvleak-turn", nil), "rvleak-held")
	waitPending(t, s.js, pool, 2)
	if err := w.stop(); err != nil {
		t.Fatal(err)
	}
	var n int
	var left string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%d subscriptions (%d before); %d goroutines running the package's code (%d before):\n%s", nc.NumSubscriptions(), subs, n, base, left)
		}
	})
	testkit.Eventually(t, 10*time.Second, "the worker's goroutines and subscriptions gone", func() bool {
		n, left = agentGoroutines()
		return n <= base && nc.NumSubscriptions() <= subs
	})
}

// agentGoroutines counts the goroutines running the agent package's code
// (a frame of package agent, not of its tests) and returns their stacks.
func agentGoroutines() (int, string) {
	return testkit.Goroutines(func(g string) bool { return strings.Contains(g, "e2a-pipeline/pipeline/agent.") })
}

// TestInterruptEndsTurnThenNextRuns: agent.Interrupt ends a turn with one
// final
// a2a.stream_event frame (status succeeded, state input-required), the
// handler's nil return adds nothing, and the task's next turn runs only
// after that frame is stored and its first frame follows it.
func TestInterruptEndsTurnThenNextRuns(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const pool = "rvintr"
	sawFinal := make(chan bool, 1)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if env.RequestID == "rvintr-1" {
			if err := w.Chunk(e2a.DeltaText, "which city?"); err != nil {
				return err
			}
			if err := agent.Interrupt(w, e2a.StateInputRequired, "Which city?"); err != nil {
				return err
			}
			if err := w.Chunk(e2a.DeltaText, "late"); !errors.Is(err, agent.ErrFinalWritten) {
				return fmt.Errorf("write after Interrupt: %v, want ErrFinalWritten", err)
			}
			return nil
		}
		fr, _ := storedFrames(t, s.nc, "rvintr-1")
		sawFinal <- len(fr) > 0 && fr[len(fr)-1].IsFinal
		return w.Complete("Paris")
	})
	startWorker(t, s.connect(t), pool, h, agent.WithConcurrency(4), agent.WithAckWait(30*time.Second))
	waitConsumer(t, s.js, pool)
	publish(t, s.js, pool, request("rvintr-1", nil))
	publishAfter(t, s.js, pool, request("rvintr-2", nil), "rvintr-1")
	fr := waitFinal(t, s.nc, "rvintr-1", 10*time.Second)
	last := fr[len(fr)-1]
	if len(fr) != 2 || last.ResponseKind != e2a.KindA2AStreamEvent || last.Status != e2a.StatusSucceeded {
		t.Fatalf("interrupted turn: %d frames, last %s/%s", len(fr), last.ResponseKind, last.Status)
	}
	waitFinal(t, s.nc, "rvintr-2", 10*time.Second)
	if !testkit.Receive(t, sawFinal, 5*time.Second, "turn 2 never ran") {
		t.Fatal("turn 2 ran before turn 1's interrupt frame was stored")
	}
	_, m1 := storedFrames(t, s.nc, "rvintr-1")
	_, m2 := storedFrames(t, s.nc, "rvintr-2")
	if m2[0].Seq < m1[len(m1)-1].Seq {
		t.Fatalf("turn 2's first frame (stream seq %d) before turn 1's final (%d)", m2[0].Seq, m1[len(m1)-1].Seq)
	}
}

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
	advs := make(chan *nats.Msg, 4)
	sub, err := s.nc.ChanSubscribe(maxDeliveriesAdvisory(pool), advs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	opts := []agent.Option{agent.WithAckWait(time.Second), agent.WithMaxDeliver(1)}
	// Its delivery runs out: the next one is the give-up.
	h := startPoisoned(t, s, pool, id, opts...)

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
	held := newRunHold()
	var calls atomic.Int32
	hold := agent.WithBeforeBurst(func(string, int64, int) {
		if calls.Add(1) != 1 {
			return // the handler's final frame
		}
		// The advisory's final frame: the handler has written nothing.
		held.hold()
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
	if err := s.nc.Publish(maxDeliveriesAdvisory(pool), adv); err != nil {
		t.Fatal(err)
	}
	testkit.Receive(t, held.entered, 10*time.Second, "the advisory's close did not publish")
	close(release) // the handler ends the request; the advisory's write is fenced
	held.check(t, s, id, wk, "the max-deliveries advisory's close was still publishing")
}

// TestRunAwaitsCancelWatchRead: Run returns only after the background read
// of its cancel watch's anchor (started by a pick-up once a reconnect made
// the anchor invalid) has ended. That goroutine was not awaited: Run
// returned while it still read the requests stream (up to ioTimeout).
//
// The read is held where it starts (its spawn) until Run has returned or,
// Run waiting for it, for a second.
func TestRunAwaitsCancelWatchRead(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const pool, id = "anchorjoin", "anchorjoin-1"
	reconnected := make(chan struct{}, 1)
	nc := s.connect(t, nats.ReconnectWait(10*time.Millisecond),
		nats.ReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} }))
	held := newRunHold()
	var once sync.Once
	spawn := func(read func()) {
		go func() {
			once.Do(held.hold)
			read()
		}()
	}
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		return w.Complete("done")
	})
	wk := startWorkerWith(t, nc, pool, func(ctx context.Context, opts ...agent.Option) error {
		return agent.RunWithAnchorSpawn(ctx, nc, pool, h, spawn, opts...)
	})
	waitConsumer(t, s.js, pool)
	// A request served: Run is set up (its anchor read) and fetching.
	publish(t, s.js, pool, request(id+"-first", nil))
	waitFinal(t, s.nc, id+"-first", 10*time.Second)
	// A reconnect: what the control subscription received meanwhile is
	// not known, the next pick-up starts a read of the anchor.
	if err := nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	testkit.Receive(t, reconnected, 10*time.Second, "the worker's connection did not reconnect")
	publish(t, s.js, pool, request(id, nil))
	testkit.Receive(t, held.entered, 10*time.Second, "no read of the anchor started")
	held.check(t, s, id, wk, "its cancel watch's read of the anchor was still running")
}

// TestRunWaitsLongForItsConsumer: a worker without consumer provisioning
// started before its consumer is made (`e2a streams apply` after the
// workers) waits for it, however long, and then serves. Run's set-up
// context (10 s) was started before that wait: a consumer made after it
// ran out left Run failing at once on its first flush (context deadline
// exceeded) instead of serving.
func TestRunWaitsLongForItsConsumer(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const pool, id = "latecons", "latecons-1"
	logs := &testkit.Buffer{}
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		return w.Complete("done")
	})
	startWorker(t, s.connect(t), pool, h, agent.WithProvisionConsumer(false),
		agent.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	// Its retries wait 0.1, 0.2, 0.4, 0.8, 1.6, 3.2 and 5 s: after the
	// eighth attempt more than 10 s have passed.
	testkit.Eventually(t, 60*time.Second, "eight attempts to find the consumer", func() bool {
		return strings.Count(logs.String(), "consumer not available yet") >= 8
	})
	cc, err := streams.AgentConsumerConfig(pool, agent.DefaultMaxAckPending)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.js.CreateConsumer(tctx(t), streams.RequestsStream, cc); err != nil {
		t.Fatal(err)
	}
	publish(t, s.js, pool, request(id, nil))
	fr := waitFinal(t, s.nc, id, 30*time.Second)
	if last := fr[len(fr)-1]; last.ResponseKind != e2a.KindComplete {
		t.Fatalf("final frame %s, want the handler's e2a.complete", last.ResponseKind)
	}
}
