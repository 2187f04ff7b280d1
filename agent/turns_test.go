package agent_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// publishAfter stores env as a request for pool that runs after the
// request after, as ingress publishes a later turn of a task.
func publishAfter(t testing.TB, js jetstream.JetStream, pool string, env *e2a.Envelope, after string) {
	t.Helper()
	publish(t, js, pool, env, subjects.HeaderAfterRequest, after)
}

// waitPending waits until n requests of pool are delivered and not
// acknowledged: a later turn picked up and waiting is one of them.
func waitPending(t testing.TB, js jetstream.JetStream, pool string, n int) {
	t.Helper()
	name, _ := streams.AgentConsumerName(pool)
	testkit.Eventually(t, 10*time.Second, "requests delivered and pending", func() bool {
		c, err := js.Consumer(tctx(t), streams.RequestsStream, name)
		return err == nil && c.CachedInfo().NumAckPending == n
	})
}

// finalSeq is the stream sequence of the message holding a request's final
// frame; firstSeq that of its first message.
func finalSeq(t testing.TB, s *server, id string) (first, final uint64) {
	t.Helper()
	waitFinal(t, s.nc, id, 10*time.Second)
	_, msgs := storedFrames(t, s.nc, id)
	return msgs[0].Seq, msgs[len(msgs)-1].Seq
}

// A later turn picked up while the earlier one runs waits: its handler
// starts only once the earlier turn's final frame is stored (it reads it
// there), and its first frame is stored after that final frame.
func TestTurnRunsAfterEarlierTurn(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	started, release := make(chan struct{}), make(chan struct{})
	sawFinal := make(chan bool, 1)
	var calls2 atomic.Int32
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if env.RequestID == "turn-1" {
			if err := w.Chunk(e2a.DeltaText, "one"); err != nil {
				return err
			}
			close(started)
			<-release
			return w.Complete("one")
		}
		calls2.Add(1)
		fr, _ := storedFrames(t, s.nc, "turn-1")
		sawFinal <- len(fr) > 0 && fr[len(fr)-1].IsFinal
		return w.Complete("two")
	})
	startWorker(t, s.connect(t), "turns", h, agent.WithConcurrency(2))
	waitConsumer(t, s.js, "turns")
	publish(t, s.js, "turns", request("turn-1", nil))
	<-started
	publishAfter(t, s.js, "turns", request("turn-2", nil), "turn-1")
	waitPending(t, s.js, "turns", 2)
	if n := calls2.Load(); n != 0 {
		t.Fatalf("turn 2 ran while turn 1 runs (%d calls)", n)
	}
	close(release)
	first2, _ := finalSeq(t, s, "turn-2")
	_, final1 := finalSeq(t, s, "turn-1")
	if !<-sawFinal {
		t.Error("turn 2's handler started before turn 1's final frame was stored")
	}
	if first2 <= final1 {
		t.Errorf("turn 2's first frame at stream sequence %d, turn 1's final at %d", first2, final1)
	}
}

// A waiting turn gives its slot back: with one slot, a later turn stored
// (and picked up) before the turn it names still lets that one run, then
// runs. Holding the slot would leave both waiting forever.
func TestTurnGivesSlotBack(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		return w.Complete(env.RequestID)
	})
	startWorker(t, s.connect(t), "oneslot", h, agent.WithConcurrency(1))
	waitConsumer(t, s.js, "oneslot")
	publishAfter(t, s.js, "oneslot", request("slot-2", nil), "slot-1")
	waitPending(t, s.js, "oneslot", 1) // slot-2 picked up, waiting
	publish(t, s.js, "oneslot", request("slot-1", nil))
	first2, _ := finalSeq(t, s, "slot-2")
	_, final1 := finalSeq(t, s, "slot-1")
	if first2 <= final1 {
		t.Errorf("slot-2's first frame at stream sequence %d, slot-1's final at %d", first2, final1)
	}
}

// An earlier turn that ends cancelled ends the wait like any final frame:
// the later turn runs.
func TestTurnAfterCancelledTurn(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	started := make(chan struct{})
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if env.RequestID == "canc-turn-1" {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		}
		return w.Complete("ran")
	})
	startWorker(t, s.connect(t), "cturns", h, agent.WithConcurrency(2))
	waitConsumer(t, s.js, "cturns")
	publish(t, s.js, "cturns", request("canc-turn-1", nil))
	<-started
	publishAfter(t, s.js, "cturns", request("canc-turn-2", nil), "canc-turn-1")
	waitPending(t, s.js, "cturns", 2)
	if _, err := agent.Cancel(tctx(t), s.js, "canc-turn-1"); err != nil {
		t.Fatal(err)
	}
	fr1 := waitFinal(t, s.nc, "canc-turn-1", 10*time.Second)
	if e, _ := fr1[len(fr1)-1].Error(); e.Code != e2a.ErrCodeCancelled {
		t.Fatalf("turn 1 final %+v", fr1[len(fr1)-1])
	}
	fr2 := waitFinal(t, s.nc, "canc-turn-2", 10*time.Second)
	if last := fr2[len(fr2)-1]; last.Status != e2a.StatusSucceeded {
		t.Fatalf("turn 2 final %+v", last)
	}
}

// A turn of a task cancelled, or past its deadline, while its handler
// runs ends once the handler has returned (it cleans up for 400 ms: a bridge
// forwarding the cancel upstream), so the later turn's handler never
// starts beside it; before, the final frame was written at once and the
// next turn ran while the handler still did. A handler that does not
// return within the stop grace has its request ended anyway (the next
// turn then runs).
func TestTurnAfterStoppedTurnWaitsForItsHandler(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var running sync.Map // turn id → its handler runs
	sawRunning := make(chan bool, 4)
	started := make(chan string, 4)
	release := make(chan struct{})
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		first, _ := env.Params["first"].(string)
		if first == "" {
			running.Store(env.RequestID, true)
			defer running.Delete(env.RequestID)
			started <- env.RequestID
			<-ctx.Done()
			if env.Params["ignores"] == true {
				<-release // past the grace
			} else {
				<-time.After(400 * time.Millisecond) // cleaning up
			}
			return context.Cause(ctx)
		}
		_, busy := running.Load(first)
		sawRunning <- busy
		return w.Complete("ran")
	})
	startWorker(t, s.connect(t), "sturns", h, agent.WithConcurrency(4), agent.WithStopGrace(time.Second))
	t.Cleanup(func() { close(release) }) // before the worker stops
	waitConsumer(t, s.js, "sturns")
	cancel := func(id string) { _, _ = agent.Cancel(tctx(t), s.js, id) }
	for _, c := range []struct {
		name   string
		params map[string]any
		stop   func(id string) // nil: a deadline
		code   string
		busy   bool
	}{
		{"cancelled", nil, cancel, e2a.ErrCodeCancelled, false},
		{"deadline", nil, nil, e2a.ErrCodeDeadlineExceeded, false},
		{"past the grace", map[string]any{"ignores": true}, cancel, e2a.ErrCodeCancelled, true},
	} {
		one, two := "stop-"+c.name+"-1", "stop-"+c.name+"-2"
		env, next := request(one, c.params), request(two, map[string]any{"first": one})
		env.TaskID, next.TaskID = "task-"+c.name, "task-"+c.name // turns of a task
		if c.stop == nil {
			env.Deadline = e2a.FormatTime(time.Now().Add(3 * time.Second))
		}
		publish(t, s.js, "sturns", env)
		publishAfter(t, s.js, "sturns", next, one)
		waitPending(t, s.js, "sturns", 2)
		if id := testkit.Receive(t, started, 10*time.Second, "turn 1's handler started"); id != one {
			t.Fatalf("%s: handler of %s started, want %s", c.name, id, one)
		}
		if c.stop != nil {
			c.stop(one)
		}
		fr1 := waitFinal(t, s.nc, one, 10*time.Second)
		if e, _ := fr1[len(fr1)-1].Error(); e.Code != c.code {
			t.Fatalf("%s: turn 1 final %+v, want %s", c.name, fr1[len(fr1)-1], c.code)
		}
		waitFinal(t, s.nc, two, 10*time.Second)
		if got := testkit.Receive(t, sawRunning, 10*time.Second, "turn 2 ran"); got != c.busy {
			t.Errorf("%s: turn 2 started with turn 1's handler running: %v, want %v", c.name, got, c.busy)
		}
	}
}

// A turn cancelled, or past its deadline, while it waits, or before its
// pick-up, ends with its final frame (cancelled, deadline_exceeded) once
// the turn before it has ended, its end stored after that turn's (a
// task's turns end in the order they run; before, a queued turn ended at
// once: the task read canceled or failed while the turn before it ran,
// and a turn queued behind an expired one ran alongside that one). No
// handler runs for them; the earlier turn goes on.
func TestTurnStoppedWhileWaiting(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	started, release := make(chan struct{}), make(chan struct{})
	held := make(chan string, 4)
	var later atomic.Int32
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if env.RequestID == "wait-1" {
			close(started)
			<-release
			return w.Complete("one")
		}
		if env.RequestID != "wait-6" {
			later.Add(1)
		}
		return w.Complete("ran")
	})
	startWorker(t, s.connect(t), "wturns", h, agent.WithConcurrency(2),
		agent.WithTurnHeld(func(id string) { held <- id }))
	waitConsumer(t, s.js, "wturns")
	publish(t, s.js, "wturns", request("wait-1", nil))
	<-started
	deadlined := request("wait-3", nil)
	deadlined.Deadline = e2a.FormatTime(time.Now().Add(300 * time.Millisecond))
	publishAfter(t, s.js, "wturns", deadlined, "wait-1")
	if id := testkit.Receive(t, held, 10*time.Second, "the turn past its deadline held"); id != "wait-3" {
		t.Fatalf("held %q", id)
	}
	expired := request("wait-5", nil)
	expired.Deadline = e2a.FormatTime(time.Now().Add(-time.Second))
	publishAfter(t, s.js, "wturns", expired, "wait-1")
	if id := testkit.Receive(t, held, 10*time.Second, "the turn past its deadline at pick-up held"); id != "wait-5" {
		t.Fatalf("held %q", id)
	}
	// A turn queued behind the expired one waits for the turn before
	// that one too (it found the expired turn ended and ran alongside it).
	publishAfterTurns(t, s.js, "wturns", request("wait-6", nil), "wait-3", "wait-1")
	publishAfter(t, s.js, "wturns", request("wait-2", nil), "wait-1")
	waitPending(t, s.js, "wturns", 5)
	if _, err := agent.Cancel(tctx(t), s.js, "wait-2"); err != nil {
		t.Fatal(err)
	}
	if id := testkit.Receive(t, held, 10*time.Second, "the cancelled turn held"); id != "wait-2" {
		t.Fatalf("held %q", id)
	}
	// A turn whose cancel is stored before it is picked up waits too.
	if _, err := agent.Cancel(tctx(t), s.js, "wait-4"); err != nil {
		t.Fatal(err)
	}
	publishAfter(t, s.js, "wturns", request("wait-4", nil), "wait-1")
	if id := testkit.Receive(t, held, 10*time.Second, "the turn cancelled before its pick-up held"); id != "wait-4" {
		t.Fatalf("held %q", id)
	}
	ends := map[string]string{"wait-2": e2a.ErrCodeCancelled, "wait-4": e2a.ErrCodeCancelled,
		"wait-3": e2a.ErrCodeDeadlineExceeded, "wait-5": e2a.ErrCodeDeadlineExceeded}
	for id := range ends {
		if fr, _ := storedFrames(t, s.nc, id); len(fr) != 0 {
			t.Fatalf("the turn %s ended while the turn before it runs: %+v", id, fr)
		}
	}
	close(release)
	_, final1 := finalSeq(t, s, "wait-1")
	for id, code := range ends {
		first, _ := finalSeq(t, s, id)
		if first <= final1 {
			t.Errorf("the turn %s's end at stream sequence %d, the turn before's at %d", id, first, final1)
		}
		fr, _ := storedFrames(t, s.nc, id)
		if e, _ := fr[0].Error(); len(fr) != 1 || e.Code != code {
			t.Fatalf("the turn %s ended before it ran: %d frames, %+v; want %s", id, len(fr), fr[0], code)
		}
	}
	if first6, _ := finalSeq(t, s, "wait-6"); first6 <= final1 {
		t.Errorf("the turn after the expired one began at stream sequence %d, before the end of the turn running then (%d)", first6, final1)
	}
	if n := later.Load(); n != 0 {
		t.Errorf("the handler ran %d times for turns stopped while waiting", n)
	}
	if fr := waitFinal(t, s.nc, "wait-1", 10*time.Second); fr[len(fr)-1].Status != e2a.StatusSucceeded {
		t.Errorf("turn 1 final %+v", fr[len(fr)-1])
	}
}

// A stopping worker hands a turn that waits for the turn before it back at
// once (its handler has not run), instead of holding it through its drain
// until that turn ends and then starting it as it stops: another worker
// takes it while the turn before still runs on the stopping one, and runs
// it once that turn has ended.
func TestWaitingTurnHandedBackAtDrain(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const pool = "dturns"
	started, release := make(chan struct{}), make(chan struct{})
	var ranOnFirst, ranOnSecond atomic.Int32
	held := make(chan string, 4)
	first := startWorker(t, s.connect(t), pool, agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if env.RequestID == "drain-1" {
			close(started)
			<-release
			return w.Complete("one")
		}
		ranOnFirst.Add(1)
		return w.Complete("two on the stopping worker")
	}), agent.WithConcurrency(3), agent.WithDrainTimeout(time.Minute), agent.WithTurnHeld(func(id string) { held <- id }))
	waitConsumer(t, s.js, pool)
	publish(t, s.js, pool, request("drain-1", nil))
	testkit.Receive(t, started, 10*time.Second, "turn 1 did not start")
	publishAfter(t, s.js, pool, request("drain-2", nil), "drain-1")
	waitPending(t, s.js, pool, 2)
	// Turn 3, cancelled while it waits: held until the turns before it
	// have ended, so that its end is stored after theirs.
	publishAfterTurns(t, s.js, pool, request("drain-3", nil), "drain-2", "drain-1")
	waitPending(t, s.js, pool, 3)
	if _, err := agent.Cancel(tctx(t), s.js, "drain-3"); err != nil {
		t.Fatal(err)
	}
	if id := testkit.Receive(t, held, 10*time.Second, "the cancelled turn 3 held"); id != "drain-3" {
		t.Fatalf("held %q", id)
	}

	first.cancel() // the drain begins: turn 1 runs on, turns 2 and 3 wait
	startWorker(t, s.connect(t), pool, agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		ranOnSecond.Add(1)
		return w.Complete("two")
	}))
	name, _ := streams.AgentConsumerName(pool)
	testkit.Eventually(t, 10*time.Second, "turns 2 and 3 handed back and delivered again while turn 1 runs", func() bool {
		c, err := s.js.Consumer(tctx(t), streams.RequestsStream, name)
		return err == nil && c.CachedInfo().Delivered.Consumer >= 5
	})
	for _, id := range []string{"drain-2", "drain-3"} {
		if fr, _ := storedFrames(t, s.nc, id); len(fr) != 0 {
			t.Fatalf("%s wrote frames while turn 1 runs: %+v", id, fr)
		}
	}
	close(release)
	if err := first.stop(); err != nil {
		t.Fatalf("the stopping worker: %v", err)
	}
	_, final1 := finalSeq(t, s, "drain-1")
	first2, final2 := finalSeq(t, s, "drain-2")
	if first2 <= final1 {
		t.Errorf("turn 2 began at stream sequence %d, before turn 1's end (%d)", first2, final1)
	}
	first3, _ := finalSeq(t, s, "drain-3")
	if first3 <= final2 {
		t.Errorf("turn 3's end at stream sequence %d, before turn 2's (%d)", first3, final2)
	}
	if fr, _ := storedFrames(t, s.nc, "drain-3"); len(fr) != 1 {
		t.Errorf("turn 3: %d frames, want its cancel alone", len(fr))
	} else if e, err := fr[0].Error(); err != nil || e.Code != e2a.ErrCodeCancelled {
		t.Errorf("turn 3 ended %+v, want %s", fr[0], e2a.ErrCodeCancelled)
	}
	if a, b := ranOnFirst.Load(), ranOnSecond.Load(); a != 0 || b != 1 {
		t.Errorf("turn 2 ran %d times on the stopping worker and %d on the other; want 0 and 1", a, b)
	}
}

// A turn naming a request that is never stored (its publish failed) runs
// once the grace has passed, as does one whose listed earlier turns are
// none stored either; one naming itself, or an id outside the
// grammar, runs at once. Not parallel: it shortens the package's grace.
func TestTurnAfterMissingRequest(t *testing.T) {
	t.Cleanup(agent.SetTurnGrace(300 * time.Millisecond)) // after the worker's stop (cleanups run last first)
	s := startServer(t)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		return w.Complete(env.RequestID)
	})
	startWorker(t, s.connect(t), "ghost", h)
	waitConsumer(t, s.js, "ghost")
	start := time.Now()
	publishAfter(t, s.js, "ghost", request("ghost-2", nil), "ghost-1")
	publishAfter(t, s.js, "ghost", request("self-1", nil), "self-1")
	// None of the turns it lists is stored either.
	publishAfterTurns(t, s.js, "ghost", request("ghosts-3", nil), "ghosts-2", "ghosts-1", "ghosts-0")
	for _, id := range []string{"ghost-2", "self-1", "ghosts-3"} {
		if fr := waitFinal(t, s.nc, id, 10*time.Second); fr[len(fr)-1].Status != e2a.StatusSucceeded {
			t.Errorf("%s final %+v", id, fr[len(fr)-1])
		}
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("ghost-2 ran %v after it was stored, before the grace", d)
	}
}

// publishAfterTurns stores env as a request for pool that runs after the
// request after, with the turns recorded before that one (earlier, newest
// first), as ingress publishes a later turn of a task.
func publishAfterTurns(t testing.TB, js jetstream.JetStream, pool string, env *e2a.Envelope, after string, earlier ...string) {
	t.Helper()
	list, err := json.Marshal(earlier)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, js, pool, env, subjects.HeaderAfterRequest, after, subjects.HeaderEarlierRequests, string(list))
}

// A task's record lists the turns A, B, C. A runs (slow); B was recorded
// but never published (its publish failed and its removal from the record
// failed too, or ingress died between the two); C is published naming B,
// and A before it (HeaderEarlierRequests). Turns never overlap
// (docs/design.md guarantee 8): once the grace for B has passed, C waits
// for A, and runs after A's final frame. Not parallel: it shortens the
// package's grace.
func TestTurnAfterUnpublishedTurnWaitsForTheOneBefore(t *testing.T) {
	const grace = 300 * time.Millisecond
	t.Cleanup(agent.SetTurnGrace(grace)) // after the worker's stop (cleanups run last first)
	s := startServer(t)
	aStarted, release := make(chan struct{}), make(chan struct{})
	cStarted := make(chan struct{}, 1)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if env.RequestID == "gap-a" {
			if err := w.Chunk(e2a.DeltaText, "a runs"); err != nil {
				return err
			}
			close(aStarted)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			return w.Complete("a")
		}
		cStarted <- struct{}{}
		return w.Complete("c")
	})
	startWorker(t, s.connect(t), "gapturns", h, agent.WithConcurrency(2))
	waitConsumer(t, s.js, "gapturns")
	publish(t, s.js, "gapturns", request("gap-a", nil))
	<-aStarted
	// gap-b: in the task's record, never stored in E2A_REQUESTS.
	publishAfterTurns(t, s.js, "gapturns", request("gap-c", nil), "gap-b", "gap-a")
	waitPending(t, s.js, "gapturns", 2)
	// A bound on an event that must not happen: ten times the grace after
	// which the runtime gives up on gap-b.
	timer := time.NewTimer(10 * grace)
	defer timer.Stop()
	select {
	case <-cStarted:
		fr, _ := storedFrames(t, s.nc, "gap-a")
		t.Errorf("turn C (after the unpublished B) ran while turn A still runs: A's stored frames %d, final %v",
			len(fr), len(fr) > 0 && fr[len(fr)-1].IsFinal)
	case <-timer.C:
	}
	close(release)
	_, finalA := finalSeq(t, s, "gap-a")
	firstC, _ := finalSeq(t, s, "gap-c")
	if firstC <= finalA {
		t.Errorf("turn C's first frame at stream sequence %d, before turn A's final at %d: the turns overlapped", firstC, finalA)
	}
}

// TestForgedLiveFinalDoesNotStartTurn: a later turn waiting for the
// earlier one listens to its live frames (e2a.live.<id>, the response
// stream's RePublish, which has no reply subject) and starts at the final
// one. A NATS user who may create consumers can have the server deliver
// its own bytes there (a push consumer's deliver_subject), whatever its
// publish permissions: a forged final frame started the later turn while
// the earlier one still ran. Such a delivery is ignored.
func TestForgedLiveFinalDoesNotStartTurn(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	started, release := make(chan struct{}), make(chan struct{})
	var calls2 atomic.Int32
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if env.RequestID == "forged-turn-1" {
			if err := w.Chunk(e2a.DeltaText, "one"); err != nil {
				return err
			}
			close(started)
			<-release
			return w.Complete("one")
		}
		calls2.Add(1)
		return w.Complete("two")
	})
	logs := &testkit.Buffer{}
	startWorker(t, s.connect(t), "fturns", h, agent.WithConcurrency(2), agent.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	waitConsumer(t, s.js, "fturns")
	publish(t, s.js, "fturns", request("forged-turn-1", nil))
	<-started
	publishAfter(t, s.js, "fturns", request("forged-turn-2", nil), "forged-turn-1")
	waitPending(t, s.js, "fturns", 2)
	m := nats.NewMsg("")
	m.Data = natstest.Frame("forged-turn-1", 1, true)
	m.Header.Set(subjects.HeaderRequestID, "forged-turn-1")
	m.Header.Set(subjects.HeaderSequence, "1")
	live, _ := subjects.Live("forged-turn-1")
	// The waiting turn listens (the delivery is sent once, to the
	// subscriptions there).
	natstest.WaitInterest(t, s.e, live, 1)
	natstest.DeliverByConsumer(t, s.nc, live, m)
	testkit.Eventually(t, 10*time.Second, "the waiting turn to ignore the forged final frame (or run)", func() bool {
		return calls2.Load() != 0 || strings.Contains(logs.String(), "ignored a live frame the server did not send")
	})
	if n := calls2.Load(); n != 0 {
		t.Fatalf("turn 2 ran while turn 1 runs, started by a forged final frame (%d calls)", n)
	}
	close(release)
	waitFinal(t, s.nc, "forged-turn-2", 10*time.Second)
}

// A turn whose earlier turn ran on another worker of the pool runs once
// that turn has ended, not once this worker's pull in flight ends: the
// fetch loop takes every free slot for each pull (here one, held for the
// fetch wait, 20 s), the slot the waiting turn gave back among them,
// and the turn waited for that pull to end (up to the fetch wait, 1 s by
// default: seen live with two workers of a pool, a task's turns alternating
// between them, each 0.4-1 s after the one before).
func TestTurnAfterTurnOnAnotherWorkerRunsAtOnce(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	started, release := make(chan struct{}), make(chan struct{})
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if env.RequestID == "other-turn-1" {
			close(started)
			<-release
		}
		return w.Complete(env.RequestID)
	})
	// One slot each: the first worker, running turn 1, pulls nothing more,
	// so turn 2 goes to the second.
	startWorker(t, s.connect(t), "otherw", h, agent.WithConcurrency(1), agent.WithFetchWait(20*time.Second))
	waitConsumer(t, s.js, "otherw")
	publish(t, s.js, "otherw", request("other-turn-1", nil))
	<-started
	startWorker(t, s.connect(t), "otherw", h, agent.WithConcurrency(1), agent.WithFetchWait(20*time.Second))
	publishAfter(t, s.js, "otherw", request("other-turn-2", nil), "other-turn-1")
	waitPending(t, s.js, "otherw", 2)
	// Turn 2 waits, its slot given back and taken by the second worker's
	// next pull.
	name, _ := streams.AgentConsumerName("otherw")
	testkit.Eventually(t, 10*time.Second, "the second worker's next pull", func() bool {
		c, err := s.js.Consumer(tctx(t), streams.RequestsStream, name)
		return err == nil && c.CachedInfo().NumWaiting == 1
	})
	close(release)
	waitFinal(t, s.nc, "other-turn-2", 8*time.Second)
}

// A request a pull delivers after a waiting turn took that pull's slot
// over (TestTurnAfterTurnOnAnotherWorkerRunsAtOnce) waits for a slot: the
// pool's concurrency still bounds the handlers running. Turn 1 is another
// worker's here: stored for another pool, its final frame written as that
// worker would.
func TestTurnTakingThePullsSlotKeepsTheBound(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	started2, release2 := make(chan struct{}), make(chan struct{})
	var running2, overlapped atomic.Bool
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		switch env.RequestID {
		case "steal-2":
			running2.Store(true)
			close(started2)
			<-release2
			running2.Store(false)
		case "steal-3":
			overlapped.Store(running2.Load())
		}
		return w.Complete(env.RequestID)
	})
	startWorker(t, s.connect(t), "stealw", h, agent.WithConcurrency(1), agent.WithFetchWait(20*time.Second))
	waitConsumer(t, s.js, "stealw")
	publish(t, s.js, "elsewhere", request("steal-1", nil))
	publishAfter(t, s.js, "stealw", request("steal-2", nil), "steal-1")
	waitPending(t, s.js, "stealw", 1)
	name, _ := streams.AgentConsumerName("stealw")
	testkit.Eventually(t, 10*time.Second, "the worker's next pull", func() bool {
		c, err := s.js.Consumer(tctx(t), streams.RequestsStream, name)
		return err == nil && c.CachedInfo().NumWaiting == 1
	})
	natstest.PublishBurst(t, s.nc, "steal-1", 0, 0, natstest.Frame("steal-1", 0, true))
	select {
	case <-started2:
	case <-time.After(8 * time.Second):
		t.Fatal("steal-2 did not run once steal-1 had ended")
	}
	publish(t, s.js, "stealw", request("steal-3", nil))
	waitPending(t, s.js, "stealw", 2)
	close(release2)
	waitFinal(t, s.nc, "steal-3", 8*time.Second)
	if overlapped.Load() {
		t.Error("steal-3 ran while steal-2 ran, on a worker of one slot")
	}
}
