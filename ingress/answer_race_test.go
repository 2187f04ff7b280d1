package ingress_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// The races of an input-required task's answers (each a new turn of the
// task, recorded before it is published) with the reads of the task:
// the blocking answer, GetTask, CancelTask, and the check of a turn once
// recorded (stillOpen). Each test orders one interleaving with the
// server's hooks (ingress.SetAppendHook, SetAppendedHook,
// SetRecordReadHook, SetUnstoredBeforeHook); TestAnswersCancelGetStress
// found them.

// answerGate is a pool handler whose AskInputPrefix turns ask for input and
// whose other turns report their start (started: the message's text and
// the request id) and then run until the test releases their text, or
// they are cancelled.
type answerGate struct {
	started chan heldTurn
	mu      sync.Mutex
	release map[string]chan struct{}
	asking  map[string]bool // released turns that ask for input again
}

// heldTurn is a turn answerGate started.
type heldTurn struct {
	text, requestID string
	ctx             context.Context
}

func newAnswerGate() *answerGate {
	return &answerGate{started: make(chan heldTurn, 16), release: map[string]chan struct{}{}}
}

func (g *answerGate) ch(text string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.release[text]
	if !ok {
		c = make(chan struct{})
		g.release[text] = c
	}
	return c
}

// done lets the turn of text complete.
func (g *answerGate) done(text string) { close(g.ch(text)) }

// ask lets the turn of text end input-required.
func (g *answerGate) ask(text string) {
	g.mu.Lock()
	if g.asking == nil {
		g.asking = map[string]bool{}
	}
	g.asking[text] = true
	g.mu.Unlock()
	close(g.ch(text))
}

// asks reports whether the turn of text is to end input-required.
func (g *answerGate) asks(text string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.asking[text]
}

func (g *answerGate) serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	text := demo.Text(env)
	if strings.HasPrefix(text, demo.AskInputPrefix) {
		return agent.Interrupt(w, e2a.StateInputRequired, "Which city?")
	}
	g.started <- heldTurn{text, env.RequestID, ctx}
	select {
	case <-g.ch(text):
		if g.asks(text) {
			return agent.Interrupt(w, e2a.StateInputRequired, "And which country?")
		}
		return w.Complete(map[string]any{"content": "noted: " + text})
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gatedInputTask starts a pipeline whose pool demo is an answerGate, and
// a task of it that asks for input: the gate, the client, the test's
// context and the task. The server's hooks are taken off at the test's
// end. Options are pipetest.Start's.
func gatedInputTask(t *testing.T, opts ...pipetest.Option) (*pipetest.Pipeline, *answerGate, *a2aclient.Client, context.Context, *a2a.Task) {
	t.Helper()
	pp := pipetest.Start(t, opts...)
	g := newAnswerGate()
	pp.Pool("demo", agent.HandlerFunc(g.serve))
	ctx, c, task := askInput(t, pp)
	t.Cleanup(func() {
		ingress.SetAppendHook(pp.Ingress, nil)
		ingress.SetAppendedHook(pp.Ingress, nil)
		ingress.SetRecordReadHook(pp.Ingress, nil, nil)
		ingress.SetLaterTurnHook(pp.Ingress, nil, nil)
		ingress.SetUnstoredBeforeHook(pp.Ingress, nil)
		ingress.SetCancelCheckHook(pp.Ingress, nil)
		ingress.SetMarkMetHook(pp.Ingress, nil)
		ingress.SetCancelMarkedHook(pp.Ingress, nil)
	})
	return pp, g, c, ctx, task
}

// heldAnswerTask is gatedInputTask with the task's first answer ("A1",
// blocking unless immediately) running, held: also the answer's request id
// and its result once it returns.
func heldAnswerTask(t *testing.T, immediately bool) (*pipetest.Pipeline, *answerGate, *a2aclient.Client, context.Context, *a2a.Task, string, <-chan answerResult) {
	t.Helper()
	pp, g, c, ctx, task := gatedInputTask(t)
	a1 := sendAnswer(ctx, c, task, "A1", immediately)
	started := testkit.Receive(t, g.started, 15*time.Second, "the first answer's turn to start")
	return pp, g, c, ctx, task, started.requestID, a1
}

// answerResult is what SendMessage answered, and how long it took.
type answerResult struct {
	res  a2a.SendMessageResult
	err  error
	took time.Duration
}

// sendAnswer sends text to the task with c, blocking or returning at once
// (immediately), and delivers its result.
func sendAnswer(ctx context.Context, c *a2aclient.Client, task *a2a.Task, text string, immediately bool) <-chan answerResult {
	out := make(chan answerResult, 1)
	go func() {
		req := v1Answer(task, text)
		if immediately {
			req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
		}
		from := time.Now()
		res, err := c.SendMessage(ctx, req)
		out <- answerResult{res, err, time.Since(from)}
	}()
	return out
}

// taskState is the state of an answer that is a Task ("" for another).
func taskState(res a2a.SendMessageResult) a2a.TaskState {
	if t, ok := res.(*a2a.Task); ok {
		return t.Status.State
	}
	return ""
}

// awaitFinished waits until requestID has its final frame.
func awaitFinished(ctx context.Context, t *testing.T, pp *pipetest.Pipeline, requestID string) {
	t.Helper()
	testkit.Eventually(t, 15*time.Second, "the turn's final frame", func() bool { return ingress.Finished(ctx, pp.Ingress, requestID) })
}

// queueA2ThenEndA1 sends the answer A2 (taken: queued behind the running
// answer A1, request a1), then lets A1 complete and waits for its final
// frame: a turn queued while a reader holds the record, which then reads
// A1 ended.
func queueA2ThenEndA1(ctx context.Context, t *testing.T, pp *pipetest.Pipeline, g *answerGate, c *a2aclient.Client, task *a2a.Task, a1 string) {
	t.Helper()
	accepted(t, sendAnswer(ctx, c, task, "A2", true), "A2")
	g.done("A1")
	awaitFinished(ctx, t, pp, a1)
}

// quick is the longest a call may take that waits for no publish: well
// under host.AwaitPublish, the wait for a turn listed and never stored.
const quick = host.AwaitPublish / 2

// refusedTurn sends R, a message checked open while the first answer A1
// (requestID a1) runs, and appends it to the task's record only once A1
// has completed: its check once recorded (stillOpen) refuses it and takes
// it out again, but only once release is closed: until then it is listed,
// and never to be stored. hold, when set, is called once R has been
// checked open, before A1 completes, with a channel closed once R is
// listed (to install a hook that holds a read until then). It returns R's
// result.
func refusedTurn(ctx context.Context, t *testing.T, pp *pipetest.Pipeline, g *answerGate, c *a2aclient.Client, task *a2a.Task, a1 string,
	hold func(listed <-chan struct{}), release <-chan struct{}) <-chan answerResult {
	t.Helper()
	reached, proceed := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	ingress.SetAppendHook(pp.Ingress, func(kind, id, _ string) {
		if kind == ingress.KindTask && id == string(task.ID) && first.CompareAndSwap(false, true) {
			close(reached)
			<-proceed
		}
	})
	r := sendAnswer(ctx, c, task, "R", false)
	testkit.Receive(t, reached, 15*time.Second, "R to reach its append")
	listed := make(chan struct{})
	if hold != nil {
		hold(listed)
	}
	var appended atomic.Bool
	ingress.SetAppendedHook(pp.Ingress, func(kind, id, requestID string) {
		if kind == ingress.KindTask && id == string(task.ID) && requestID != a1 && appended.CompareAndSwap(false, true) {
			close(listed)
			testkit.Receive(t, release, 15*time.Second, "R's release")
		}
	})
	g.done("A1")
	awaitFinished(ctx, t, pp, a1)
	close(proceed)
	testkit.Receive(t, listed, 15*time.Second, "R to be listed")
	return r
}

// firstWaits is a hook holding the first call for the task until listed
// is closed.
func firstWaits(t *testing.T, task *a2a.Task, listed <-chan struct{}) func(string) {
	var once atomic.Bool
	return func(id string) {
		if id == string(task.ID) && once.CompareAndSwap(false, true) {
			testkit.Receive(t, listed, 15*time.Second, "R to be listed")
		}
	}
}

// refusedR checks R's result: refused as to a finished task.
func refusedR(t *testing.T, r <-chan answerResult) {
	t.Helper()
	rr := testkit.Receive(t, r, 30*time.Second, "R's answer")
	if !errors.Is(rr.err, a2a.ErrUnsupportedOperation) {
		t.Errorf("R: %+v %v, want it refused as to a finished task", rr.res, rr.err)
	}
}

// readWith is a SetRecordReadHook read hook closing the returned channel
// at the first read of the task's record that lists more than n requests.
func readWith(task *a2a.Task, n int) (func(string, []string), <-chan struct{}) {
	done := make(chan struct{})
	var once sync.Once
	return func(id string, ids []string) {
		if id == string(task.ID) && len(ids) > n {
			once.Do(func() { close(done) })
		}
	}, done
}

// TestBlockingAnswerNotHeldByRefusedTurn: the blocking answer A1 reads the
// task's record at its turn's end (a2a.Answers.TurnEnd) while it lists R,
// a message appended after A1 completed and refused then (stillOpen), not
// yet taken out again. The answer waited for R to be stored, up to
// host.AwaitPublish (6 s), not noticing it was taken out; it is answered
// at once now (egress.Service.AwaitListed), the task completed.
func TestBlockingAnswerNotHeldByRefusedTurn(t *testing.T) {
	pp, g, c, ctx, task, a1, a1res := heldAnswerTask(t, false)
	read, readR := readWith(task, 2) // the interrupted turn, A1, R
	r := refusedTurn(ctx, t, pp, g, c, task, a1, func(listed <-chan struct{}) {
		// A1's end reads the record once R is in it.
		ingress.SetRecordReadHook(pp.Ingress, firstWaits(t, task, listed), read)
	}, readR)
	got := testkit.Receive(t, a1res, 30*time.Second, "the first answer")
	if got.err != nil || taskState(got.res) != a2a.TaskStateCompleted {
		t.Fatalf("the first answer: %T %+v %v, want the task completed", got.res, got.res, got.err)
	}
	refusedR(t, r)
	if got.took > quick {
		t.Errorf("the first answer took %v: held by R, refused and taken out of the record", got.took)
	}
}

// TestCancelNotHeldByRefusedTurn: CancelTask reads the task's record while
// it lists R, a message appended after the answer A1 completed the task
// and refused then (stillOpen), not yet taken out again. The cancel took R
// for the running turn and waited for it to be stored, up to
// host.AwaitPublish (6 s; 16 s with a turn listed before it, the cancel's
// wait added), not noticing it was taken out (egress.WithListing: the
// record read again as it waits); it is answered at once now, the task
// not cancelable (completed).
func TestCancelNotHeldByRefusedTurn(t *testing.T) {
	pp, g, c, ctx, task, a1, _ := heldAnswerTask(t, true)
	read, readR := readWith(task, 2) // the interrupted turn, A1, R
	ingress.SetRecordReadHook(pp.Ingress, nil, read)
	r := refusedTurn(ctx, t, pp, g, c, task, a1, nil, readR)
	from := time.Now()
	got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	took := time.Since(from)
	if !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Errorf("CancelTask: %+v %v, want the completed task not cancelable", got, err)
	}
	refusedR(t, r)
	if took > quick {
		t.Errorf("CancelTask took %v: held by R, refused and taken out of the record", took)
	}
}

// onceRead is a SetRecordReadHook read hook running f once, at the first
// read of the task's record that lists n requests (f runs in the reading
// call's goroutine, which waits for it; reads meanwhile go on).
func onceRead(task *a2a.Task, n int, f func()) func(string, []string) {
	var once atomic.Bool
	return func(id string, ids []string) {
		if id == string(task.ID) && len(ids) == n && once.CompareAndSwap(false, true) {
			f()
		}
	}
}

// accepted checks that an answer sent at once was accepted: the task (it
// may run in a hook, off the test's goroutine: Errorf).
func accepted(t *testing.T, r <-chan answerResult, what string) {
	t.Helper()
	got := testkit.Receive(t, r, 30*time.Second, "%s's answer", what)
	if got.err != nil || taskState(got.res) == "" {
		t.Errorf("%s: %T %+v %v, want it accepted", what, got.res, got.res, got.err)
	}
}

// TestGetTaskNotCompletedWithTurnQueued: GetTask reads the task's record
// while the answer A1 runs; A2 is appended then (queued behind A1: taken),
// and A1 completes before GetTask reads the frames. GetTask answered the
// task completed, as the record it had read made it, though A2 then ran:
// a terminal state taken back. It reads the record again once the frames
// are read (a2a.Answers.A2ATaskNow) and answers the task as A2 makes it.
func TestGetTaskNotCompletedWithTurnQueued(t *testing.T) {
	pp, g, c, ctx, task, a1, _ := heldAnswerTask(t, true)
	ingress.SetRecordReadHook(pp.Ingress, nil, onceRead(task, 2, func() { // the interrupted turn, A1
		queueA2ThenEndA1(ctx, t, pp, g, c, task, a1)
	}))
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State.Terminal() {
		t.Errorf("GetTask answered the task %s with A2 queued, which then runs", got.Status.State)
	}
	testkit.Receive(t, g.started, 15*time.Second, "A2 to start")
	g.done("A2")
}

// TestBlockingAnswerNotCompletedWithTurnQueued: the blocking answer A1
// reads the task's record at its turn's end while it lists A2, queued
// behind A1 and then running; A3 is appended while A2 runs (taken), and
// A2 completes before the answer reads the frames. The answer was the
// task completed, as A2 left it, though A3 then ran; it reads the record
// again once the frames are read (a2a.Answers.A2ATaskNow).
func TestBlockingAnswerNotCompletedWithTurnQueued(t *testing.T) {
	pp, g, c, ctx, task, _, a1res := heldAnswerTask(t, false)
	accepted(t, sendAnswer(ctx, c, task, "A2", true), "A2")
	ingress.SetRecordReadHook(pp.Ingress, nil, onceRead(task, 3, func() { // the interrupted turn, A1, A2
		a2 := testkit.Receive(t, g.started, 15*time.Second, "A2 to start")
		accepted(t, sendAnswer(ctx, c, task, "A3", true), "A3")
		g.done("A2")
		awaitFinished(ctx, t, pp, a2.requestID)
	}))
	g.done("A1")
	got := testkit.Receive(t, a1res, 30*time.Second, "the first answer")
	if got.err != nil || taskState(got.res) == "" {
		t.Fatalf("the first answer: %T %+v %v, want the task", got.res, got.res, got.err)
	}
	if st := taskState(got.res); st.Terminal() {
		t.Errorf("the first answer is the task %s with A3 queued, which then runs", st)
	}
	testkit.Receive(t, g.started, 15*time.Second, "A3 to start")
	g.done("A3")
}

// TestAnswerBehindPublishingTurnTaken: A2 is appended while the answer A1
// runs (queued behind it: taken) and its publish is slow; A1 completes,
// and A3, appended after A2, is checked once recorded (stillOpen) while
// A2 is listed and not stored. The check skipped A2 (a turn never
// published is no turn) and refused A3 as to the task A1 had completed,
// though A2 then ran, and A3 would have run after it. It awaits A2 now
// (egress.Service.AwaitListed: stored, or taken out of the record) and
// takes A3.
func TestAnswerBehindPublishingTurnTaken(t *testing.T) {
	pp, g, c, ctx, task, a1, _ := heldAnswerTask(t, true)
	listed, release := make(chan string, 1), make(chan struct{})
	var held, released atomic.Bool
	ingress.SetAppendedHook(pp.Ingress, func(kind, id, requestID string) {
		if kind == ingress.KindTask && id == string(task.ID) && held.CompareAndSwap(false, true) {
			listed <- requestID
			<-release
		}
	})
	a2res := sendAnswer(ctx, c, task, "A2", true)
	a2 := testkit.Receive(t, listed, 15*time.Second, "A2 to be listed")
	ingress.SetUnstoredBeforeHook(pp.Ingress, func(_, _, unstored string) {
		if unstored == a2 && released.CompareAndSwap(false, true) {
			close(release) // A2's publish goes on once A3's check found it unstored
		}
	})
	g.done("A1")
	awaitFinished(ctx, t, pp, a1)
	a3res := sendAnswer(ctx, c, task, "A3", true)
	accepted(t, a2res, "A2")
	a3 := testkit.Receive(t, a3res, 30*time.Second, "A3's answer")
	if !released.Load() {
		t.Fatal("A3's check did not find A2 unstored")
	}
	if a3.err != nil {
		t.Fatalf("A3, appended behind A2 (queued, publishing): %v, want it taken", a3.err)
	}
	testkit.Receive(t, g.started, 15*time.Second, "A2 to start")
	g.done("A2")
	testkit.Receive(t, g.started, 15*time.Second, "A3 to start")
	g.done("A3")
}

// TestCancelTakesTurnQueuedBeforeTheEnd: CancelTask reads the task's
// record while the answer A1 runs; A2 is appended then (queued behind A1:
// taken), and A1 completes before the cancel looks at it. The cancel found
// nothing running in the task it had read and was refused (not
// cancelable: the task completed), though A2 then ran. It reads the record
// again when it finds nothing to cancel (cancelRunning: newestMoved), and
// cancels A2.
func TestCancelTakesTurnQueuedBeforeTheEnd(t *testing.T) {
	pp, g, c, ctx, task, a1, _ := heldAnswerTask(t, true)
	ingress.SetRecordReadHook(pp.Ingress, nil, onceRead(task, 2, func() { // the interrupted turn, A1
		queueA2ThenEndA1(ctx, t, pp, g, c, task, a1)
	}))
	got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	canceledWithA2Queued(t, got, err, g)
}

// TestStreamNotHeldByRefusedTurn: the stream of the answer A1
// (SendStreamingMessage) reads at its turn's end the turn the task's
// record lists after it (LaterTurn) while it lists R, a message appended
// after A1 completed and refused then (stillOpen), not yet taken out
// again. The stream waited for R to be stored, up to host.AwaitPublish
// (6 s), before it wrote the task's end; it ends at once now
// (egress.Service.AwaitListed), completed.
func TestStreamNotHeldByRefusedTurn(t *testing.T) {
	pp, g, c, ctx, task := gatedInputTask(t)
	type streamEnd struct {
		last a2a.Event
		err  error
		at   time.Time
	}
	ended := make(chan streamEnd, 1)
	go func() {
		var last a2a.Event
		for ev, err := range c.SendStreamingMessage(ctx, v1Answer(task, "A1")) {
			if err != nil {
				ended <- streamEnd{last, err, time.Now()}
				return
			}
			last = ev
		}
		ended <- streamEnd{last, nil, time.Now()}
	}()
	a1 := testkit.Receive(t, g.started, 15*time.Second, "the first answer's turn to start").requestID
	readR := make(chan struct{})
	var once sync.Once
	r := refusedTurn(ctx, t, pp, g, c, task, a1, func(listed <-chan struct{}) {
		// The stream's read at A1's end, once R is listed.
		ingress.SetLaterTurnHook(pp.Ingress, firstWaits(t, task, listed), func(id, next string) {
			if id == string(task.ID) && next != "" {
				once.Do(func() { close(readR) })
			}
		})
	}, readR)
	read := time.Now()
	end := testkit.Receive(t, ended, 30*time.Second, "the first answer's stream to end")
	if end.err != nil {
		t.Fatalf("the stream: %v", end.err)
	}
	if su, ok := end.last.(*a2a.TaskStatusUpdateEvent); !ok || su.Status.State != a2a.TaskStateCompleted {
		t.Errorf("the stream's last event %#v, want the task completed", end.last)
	}
	refusedR(t, r)
	if took := end.at.Sub(read); took > quick {
		t.Errorf("the stream ended %v after R was listed: held by R, refused and taken out of the record", took)
	}
}

// TestAnswerCheckedOpenWithTurnQueued: the answer A3's front door reads
// the task's record while the answer A1 runs; A2 is appended then (queued
// behind A1: taken), and A1 completes before the front door reads the
// frames (taskOpen). A3 was refused as to a finished task, though A2 then
// ran; the record is read again when the task reads finished, and A3,
// appended after A2, is taken.
func TestAnswerCheckedOpenWithTurnQueued(t *testing.T) {
	pp, g, c, ctx, task, a1, _ := heldAnswerTask(t, true)
	ingress.SetRecordReadHook(pp.Ingress, nil, onceRead(task, 2, func() { // the interrupted turn, A1
		queueA2ThenEndA1(ctx, t, pp, g, c, task, a1)
	}))
	a3 := testkit.Receive(t, sendAnswer(ctx, c, task, "A3", true), 30*time.Second, "A3's answer")
	if a3.err != nil {
		t.Fatalf("A3, sent while A2 was queued: %v, want it taken", a3.err)
	}
	for _, text := range []string{"A2", "A3"} {
		testkit.Receive(t, g.started, 15*time.Second, "%s to start", text)
		g.done(text)
	}
}

// TestCancelInterruptedTakesTurnQueuedBeforeTheEnd: CancelTask of an
// input-required task finds the answer A1 appended since its check (the
// cancel turn's append is refused) and reads the record again; A2 is
// appended then (queued behind A1: taken), and A1 completes before the
// cancel reads its frames. The cancel was refused (not cancelable: the
// task completed), though A2 then ran; it reads the record again when
// the task reads finished, and cancels A2.
func TestCancelInterruptedTakesTurnQueuedBeforeTheEnd(t *testing.T) {
	pp, g, c, ctx, task := gatedInputTask(t)
	var a1 string
	var checks atomic.Int32
	ingress.SetCancelCheckHook(pp.Ingress, func(id string, ids []string) {
		if id != string(task.ID) {
			return
		}
		switch checks.Add(1) {
		case 1: // the task as CancelTask read it: A1 comes, and runs
			accepted(t, sendAnswer(ctx, c, task, "A1", true), "A1")
			a1 = testkit.Receive(t, g.started, 15*time.Second, "A1 to start").requestID
		case 2: // read again, with A1: A2 comes, A1 completes
			if len(ids) != 2 || ids[1] != a1 {
				t.Errorf("the cancel read %v, want the interrupted turn and A1 %s", ids, a1)
			}
			queueA2ThenEndA1(ctx, t, pp, g, c, task, a1)
		}
	})
	got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	if checks.Load() < 2 {
		t.Fatalf("the cancel checked the task %d times, want A1 found", checks.Load())
	}
	canceledWithA2Queued(t, got, err, g)
}

// canceledWithA2Queued checks the answer to a CancelTask sent while the
// answer A2 was queued (got, err): the task canceled, and A2 not running
// on (cancelled before it ran, or its handler's context done).
func canceledWithA2Queued(t *testing.T, got *a2a.Task, err error, g *answerGate) {
	t.Helper()
	if err != nil {
		t.Fatalf("CancelTask with A2 queued: %v, want the task canceled", err)
	}
	if got.Status.State != a2a.TaskStateCanceled {
		t.Errorf("CancelTask answered %s, want canceled", got.Status.State)
	}
	select {
	case a2 := <-g.started:
		if a2.ctx.Err() == nil {
			t.Error("A2 runs on after the cancel")
			g.done("A2")
		}
	default: // cancelled before it ran
	}
}
