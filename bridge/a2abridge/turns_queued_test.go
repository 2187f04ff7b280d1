package a2abridge_test

import (
	"context"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// slowTurn starts a "slow:" turn on pool through c's stream and returns
// its pipeline task once its first chunk came; the stream is read on to
// its end, its last state sent on done.
func slowTurn(t *testing.T, c *a2aclient.Client, done chan<- a2a.TaskState) a2a.TaskID {
	t.Helper()
	ids := make(chan a2a.TaskID, 1)
	go func() {
		v := up.NewTurn()
		sent := false
		for ev, err := range c.SendStreamingMessage(testCtx(t), up.Msg("slow: first")) {
			if err != nil {
				t.Errorf("slow stream: %v", err)
				break
			}
			v.Add(ev)
			if !sent && v.Chunks[up.SlowArtifact] > 0 {
				ids <- v.Task.TaskID
				sent = true
			}
		}
		if !sent {
			close(ids)
		}
		done <- v.State()
	}()
	id, ok := <-ids
	if !ok || id == "" {
		t.Fatal("the slow turn never streamed a chunk")
	}
	return id
}

// queueTurn sends text to task id (SendMessage, blocking) in the
// background, its answer (or error) sent on out, and returns once the
// task's record holds two turns.
func queueTurn(t *testing.T, p *pipetest.Pipeline, c *a2aclient.Client, id a2a.TaskID, text string, out chan<- a2a.SendMessageResult, errs chan<- error) {
	t.Helper()
	go func() {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
		msg.TaskID = id
		res, err := c.SendMessage(testCtx(t), &a2a.SendMessageRequest{Message: msg})
		if err != nil {
			errs <- err
			return
		}
		out <- res
	}()
	ts, err := ingress.NewTaskStore(context.Background(), p.JS)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the second turn in the task's record", func() bool {
		rec, err := ts.Get(context.Background(), ingress.KindTask, string(id))
		return err == nil && len(rec.RequestIDs) == 2
	})
}

// slowThenQueued bridges pool "agent" of a new pipeline to srv, starts a
// slow turn of a new task (its stream's end state on first) and queues a
// second turn "second" behind it (its answer on answers, or its error on
// errs); it returns the pool's v1.0 client and the task.
func slowThenQueued(t *testing.T, srv *up.Server) (c *a2aclient.Client, id a2a.TaskID, first chan a2a.TaskState, answers chan a2a.SendMessageResult, errs chan error) {
	t.Helper()
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", srv.BaseURL())
	c = v1Client(t, p, "agent")
	first = make(chan a2a.TaskState, 1)
	id = slowTurn(t, c, first)
	answers, errs = make(chan a2a.SendMessageResult, 1), make(chan error, 1)
	queueTurn(t, p, c, id, "second", answers, errs)
	return c, id, first, answers, errs
}

// wantBothReplies checks that the task id, once its last turn ended, is
// completed with the first turn's reply (first) and the second's
// ("second" echoed), in its artifacts or history.
func wantBothReplies(t *testing.T, c *a2aclient.Client, id a2a.TaskID, first string) {
	t.Helper()
	got, err := c.GetTask(testCtx(t), &a2a.GetTaskRequest{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	arts, _ := taskText(got)
	var hist strings.Builder
	for _, m := range got.History {
		hist.WriteString(up.TextOf(m.Parts))
	}
	all := arts + hist.String()
	if got.Status.State != a2a.TaskStateCompleted || !strings.Contains(all, first) || !strings.Contains(all, up.EchoText("second")) {
		t.Errorf("GetTask after the last turn: %s, artifacts %q history %q; want completed with both replies",
			got.Status.State, arts, hist.String())
	}
}

// TestBridgedTurnQueuedBehindRunningTurn: a second message to a
// task of an A2A-bridged pool, sent while its first turn (a slow
// upstream task) streams: while it waits the task is working (GetTask,
// ListTasks), it reaches the agent only once the first turn ended, and
// the task then completes holding both turns' replies.
func TestBridgedTurnQueuedBehindRunningTurn(t *testing.T) {
	srv := up.Start(t, up.Options{SlowInterval: 20 * time.Millisecond, SlowChunks: 15})
	c, id, first, answers, errs := slowThenQueued(t, srv)
	ctx := testCtx(t)
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
	if err != nil || got.Status.State.Terminal() {
		t.Fatalf("GetTask with a turn queued: %v %v, want a state not terminal", got, err)
	}
	if n := len(srv.Executions()); n != 1 {
		t.Errorf("%d agent executions while the first turn runs, want 1", n)
	}
	if st := <-first; st != a2a.TaskStateCompleted {
		t.Errorf("first turn's stream ended %s", st)
	}
	var res a2a.SendMessageResult
	select {
	case res = <-answers:
	case err := <-errs:
		t.Fatalf("the queued turn: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("the queued turn answered %#v, want the task completed", res)
	}
	execs := srv.Executions()
	if len(execs) != 2 || up.TextOf(execs[1].Message.Parts) != "second" {
		t.Fatalf("agent executions %+v, want the slow turn then the second", execs)
	}
	wantBothReplies(t, c, id, up.SlowText(15))
}

// TestBridgedCancelRunningAndQueued: CancelTask on a task of an
// A2A-bridged pool while its first turn runs upstream and a second waits
// behind it: both end, the second never reaches the agent, the agent's
// task is cancelled, and the task ends canceled.
func TestBridgedCancelRunningAndQueued(t *testing.T) {
	srv := up.Start(t, up.Options{SlowInterval: 20 * time.Millisecond})
	c, id, first, answers, errs := slowThenQueued(t, srv)
	ctx := testCtx(t)
	if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id}); err != nil {
		t.Fatalf("CancelTask: %v", err)
	}
	if st := <-first; st != a2a.TaskStateCanceled {
		t.Errorf("first turn's stream ended %s, want canceled", st)
	}
	select {
	case res := <-answers:
		if task, ok := res.(*a2a.Task); !ok || task.Status.State != a2a.TaskStateCanceled {
			t.Errorf("the queued turn answered %#v, want the task canceled", res)
		}
	case err := <-errs:
		t.Logf("the queued turn: %v", err)
	}
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("GetTask after the cancel: %v %v, want canceled", got, err)
	}
	for _, e := range srv.Executions() {
		if up.TextOf(e.Message.Parts) == "second" {
			t.Errorf("the queued turn reached the agent: %+v", e)
		}
	}
	// The cancel is forwarded to the agent as the turn ends, not before
	// the task shows canceled.
	testkit.Eventually(t, 10*time.Second, "the agent's running task cancelled", func() bool { return len(srv.Cancels()) > 0 })
}

// TestTakeoverWithQueuedTurn: the worker holding a task's running
// turn (a slow upstream task) and its queued second turn dies; the worker
// taking both over finishes the first (resumed upstream) before the
// second reaches the agent, once: the first's stream completes with every
// chunk, the second answers, and the task completes with both replies.
func TestTakeoverWithQueuedTurn(t *testing.T) {
	srv := up.Start(t, up.Options{SlowInterval: 30 * time.Millisecond, SlowChunks: slowChunks})
	tk := startTakeover(t, srv.BaseURL())
	c := v1Client(t, tk.p, "agent")
	turn := up.NewTurn()
	for turn.Chunks[up.SlowArtifact] < 2 {
		ev, ok := <-tk.events
		if !ok {
			t.Fatalf("the stream ended early: %v", <-tk.errs)
		}
		turn.Add(ev)
	}
	id := turn.Task.TaskID
	answers, errs := make(chan a2a.SendMessageResult, 1), make(chan error, 1)
	queueTurn(t, tk.p, c, id, "second", answers, errs)
	tk.stopA()
	tk.worker(t, srv.BaseURL())
	tk.finish(t, turn)
	if got := turn.Text(up.SlowArtifact); got != slowText(slowChunks) || turn.State() != a2a.TaskStateCompleted {
		t.Errorf("first turn after the takeover: %s\n got %q\nwant %q", turn.State(), got, slowText(slowChunks))
	}
	select {
	case res := <-answers:
		if task, ok := res.(*a2a.Task); !ok || task.Status.State != a2a.TaskStateCompleted {
			t.Errorf("the queued turn answered %#v, want the task completed", res)
		}
	case err := <-errs:
		t.Fatalf("the queued turn: %v", err)
	}
	var seconds int
	for _, e := range srv.Executions() {
		if up.TextOf(e.Message.Parts) == "second" {
			seconds++
		}
	}
	if seconds != 1 {
		t.Errorf("the queued turn reached the agent %d times, want once", seconds)
	}
	wantBothReplies(t, c, id, slowText(slowChunks))
}

// racingAsker is an agent that answers every message with an artifact
// "re: <text>" and asks for input again, so its task never ends; its
// turn of text held waits until release is closed. Each turn's task and
// whether it continued one is recorded, and so is any turn that started
// while another of its task ran.
type racingAsker struct {
	held    string
	release chan struct{}
	mu      sync.Mutex
	turns   []string // "<task> <continued> <text>"
	running map[a2a.TaskID]bool
	overlap []string
}

func (e *racingAsker) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	text := up.TextOf(ec.Message.Parts)
	return func(yield func(a2a.Event, error) bool) {
		e.mu.Lock()
		e.turns = append(e.turns, string(ec.TaskID)+" "+map[bool]string{true: "continued", false: "new"}[ec.StoredTask != nil]+" "+text)
		if e.running[ec.TaskID] {
			e.overlap = append(e.overlap, text)
		}
		e.running[ec.TaskID] = true
		e.mu.Unlock()
		defer func() { e.mu.Lock(); delete(e.running, ec.TaskID); e.mu.Unlock() }()
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		if text == e.held {
			select {
			case <-e.release:
			case <-ctx.Done():
				return
			}
		}
		if !yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("re: "+text)), nil) {
			return
		}
		q := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("and then?"))
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, q), nil)
	}
}

func (e *racingAsker) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// TestRacingAnswersOfBridgedInterruptedTask: a task of an
// A2A-bridged pool waits for input (the agent asks after every message);
// two answers are sent to it at once, the second while the first runs
// upstream. Both reach the agent's task, in order, one after the other
// (the agent never sees a message while its task works, which a2a-go's
// server would refuse), each is answered, and the task ends waiting for
// input again with every reply.
func TestRacingAnswersOfBridgedInterruptedTask(t *testing.T) {
	exec := &racingAsker{held: "a1", release: make(chan struct{}), running: map[a2a.TaskID]bool{}}
	url, _ := startV1(t, exec)
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", url)
	c := v1Client(t, p, "agent")
	ctx := testCtx(t)
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("q0"))})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("first turn: %#v, want input-required", res)
	}
	ts, err := ingress.NewTaskStore(ctx, p.JS)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		text string
		res  a2a.SendMessageResult
		err  error
	}
	answers := make(chan answer, 2)
	send := func(text string) {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
		msg.TaskID, msg.ContextID = task.ID, task.ContextID
		r, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
		answers <- answer{text, r, err}
	}
	turns := func() int {
		rec, err := ts.Get(ctx, ingress.KindTask, string(task.ID))
		if err != nil {
			return 0
		}
		return len(rec.RequestIDs)
	}
	go send("a1")
	testkit.Eventually(t, 20*time.Second, "the first answer in the task's record", func() bool { return turns() == 2 })
	go send("a2")
	testkit.Eventually(t, 20*time.Second, "the second answer in the task's record", func() bool { return turns() == 3 })
	close(exec.release)
	for range 2 {
		a := <-answers
		if a.err != nil {
			t.Errorf("answer %s: %v", a.text, a.err)
		}
	}
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	arts, _ := taskText(got)
	for _, m := range got.History {
		arts += up.TextOf(m.Parts)
	}
	exec.mu.Lock()
	defer exec.mu.Unlock()
	if len(exec.overlap) > 0 {
		t.Errorf("turns %v started while their task worked", exec.overlap)
	}
	if len(exec.turns) != 3 {
		t.Fatalf("agent turns %q, want q0 then a1 and a2 continuing its task", exec.turns)
	}
	up0, _, _ := strings.Cut(exec.turns[0], " ")
	if exec.turns[1] != up0+" continued a1" || exec.turns[2] != up0+" continued a2" {
		t.Errorf("agent turns %q, want a1 then a2 continuing task %s", exec.turns, up0)
	}
	if got.Status.State != a2a.TaskStateInputRequired || !strings.Contains(arts, "re: a1") || !strings.Contains(arts, "re: a2") {
		t.Errorf("GetTask after both answers: %s %q, want input-required with both replies (artifacts or history)", got.Status.State, arts)
	}
}
