package ingress_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// askInput starts a task of pp's pool demo, whose handler asks for input
// on an AskInputPrefix message, with a v1.0 client over JSON-RPC: the
// client, a context bounding the test, and the input-required task.
func askInput(t *testing.T, pp *pipetest.Pipeline) (context.Context, *a2aclient.Client, *a2a.Task) {
	t.Helper()
	p := &pipeline{url: pp.URL, nc: pp.NC, js: pp.JS, in: pp.Ingress}
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx, c, newInputTask(ctx, t, c)
}

// newInputTask starts a task with c whose turn asks for input (a pool
// handler asking on an AskInputPrefix message, as askInput's) and returns
// it, input-required.
func newInputTask(ctx context.Context, t testing.TB, c *a2aclient.Client) *a2a.Task {
	t.Helper()
	res, err := c.SendMessage(ctx, userMessage(demo.AskInputPrefix+" the city"))
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("result %T %+v, want an input-required task", res, res)
	}
	return task
}

// TestCancelInterruptedRacesTheAnswer: the client's answer to an
// input-required task is appended to the task's record after CancelTask
// checked that the task's last turn ended interrupted, before the cancel
// turn is appended (the test hook runs the answer's turn in that window).
// The cancel then stops the answer's turn, which runs: CancelTask and
// GetTask answer the task canceled only with that turn cancelled, never
// while it runs on, and the answer's own result is canceled too.
func TestCancelInterruptedRacesTheAnswer(t *testing.T) {
	pp := pipetest.Start(t)
	started := make(chan context.Context, 1) // the answer turn's context, once it runs
	release := make(chan struct{})           // ends a turn not cancelled
	pp.Pool("demo", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if strings.HasPrefix(demo.Text(env), demo.AskInputPrefix) {
			return agent.Interrupt(w, e2a.StateInputRequired, "Which city?")
		}
		started <- ctx
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-release:
			return nil
		}
	}))
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	ctx, c, task := askInput(t, pp)

	type result struct {
		res a2a.SendMessageResult
		err error
	}
	answered := make(chan result, 1)
	var answerCtx context.Context
	var once sync.Once
	ingress.SetCancelTurnHook(pp.Ingress, func(taskID string) {
		once.Do(func() {
			if taskID != string(task.ID) {
				t.Errorf("hook for task %q, want %q", taskID, task.ID)
			}
			// The answer, appended to the record and running once its
			// handler started.
			go func() {
				res, err := c.SendMessage(ctx, v1Answer(task, "Paris"))
				answered <- result{res, err}
			}()
			select {
			case answerCtx = <-started:
			case <-ctx.Done():
				t.Errorf("the answer's turn did not start: %v", ctx.Err())
			}
		})
	})

	got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatalf("CancelTask: %v", err)
	}
	if answerCtx == nil {
		t.Fatal("the hook did not run the answer")
	}
	// The cancel's final frames are written: the answer's turn, if it
	// was cancelled, had its context cancelled before its final frame.
	running := answerCtx.Err() == nil
	g, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if running && g.Status.State == a2a.TaskStateCanceled {
		t.Errorf("GetTask shows the task %s while its answer's turn runs, not cancelled", g.Status.State)
	}
	if running {
		t.Error("the cancel did not stop the answer's turn")
	}
	if got.Status.State != a2a.TaskStateCanceled || g.Status.State != a2a.TaskStateCanceled {
		t.Errorf("CancelTask answered %s, GetTask %s: want canceled", got.Status.State, g.Status.State)
	}

	close(release)
	r := <-answered
	if r.err != nil {
		t.Fatalf("the answer: %v", r.err)
	}
	if at, ok := r.res.(*a2a.Task); !ok || at.ID != task.ID || at.Status.State != a2a.TaskStateCanceled {
		t.Errorf("the answer's result %T %+v, want the task canceled", r.res, r.res)
	}
	if g, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID}); err != nil || g.Status.State != a2a.TaskStateCanceled {
		t.Errorf("GetTask at the end: %+v %v, want canceled", g, err)
	}
}

// TestCancelInterruptedAnswerEndsThenAnswered: the client's answer to an
// input-required task is appended after CancelTask checked the task (the
// cancel turn's append is refused) and runs; as the cancel goes to stop
// it, that turn ends asking again (input-required), and the client
// answers at once: a second answer, appended after the turn the cancel
// found ended, runs. The cancel stops that one and the task ends
// canceled. It was refused as not cancelable: the task, checked again,
// had that second answer as its newest turn, not finished, which the
// check took for the turn the cancel had found ended (or never
// published), and the task ran on.
func TestCancelInterruptedAnswerEndsThenAnswered(t *testing.T) {
	pp := pipetest.Start(t)
	parisStarted := make(chan struct{}, 1)
	releaseParis := make(chan struct{})
	running := make(chan context.Context, 1) // the second answer's turn, once it runs
	ended := make(chan struct{})             // the test's end: ends a turn not cancelled
	defer close(ended)
	pp.Pool("demo", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		switch text := demo.Text(env); {
		case strings.HasPrefix(text, demo.AskInputPrefix):
			return agent.Interrupt(w, e2a.StateInputRequired, "Which city?")
		case text == "Paris": // the first answer: asks again once released
			parisStarted <- struct{}{}
			select {
			case <-releaseParis:
				return agent.Interrupt(w, e2a.StateInputRequired, "Which district?")
			case <-ctx.Done():
				return ctx.Err()
			}
		default: // the second answer: runs until cancelled
			running <- ctx
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-ended:
				return nil
			}
		}
	}))
	ctx, c, task := askInput(t, pp)

	type result struct {
		res a2a.SendMessageResult
		err error
	}
	send := func(text string) <-chan result {
		done := make(chan result, 1)
		go func() {
			res, err := c.SendMessage(ctx, v1Answer(task, text))
			done <- result{res, err}
		}()
		return done
	}
	var paris, bank <-chan result
	var bankCtx context.Context
	var checked, found sync.Once
	ingress.SetCancelTurnHook(pp.Ingress, func(string) {
		checked.Do(func() {
			// The first answer, appended before the cancel turn: it runs.
			paris = send("Paris")
			select {
			case <-parisStarted:
			case <-ctx.Done():
				t.Errorf("the first answer's turn did not start: %v", ctx.Err())
			}
		})
	})
	ingress.SetCancelNewerTurnHook(pp.Ingress, func(taskID, _ string) {
		found.Do(func() {
			// The cancel found the first answer running: it ends asking
			// again, and the client answers that question.
			close(releaseParis)
			r := <-paris
			if at, ok := r.res.(*a2a.Task); r.err != nil || !ok || at.Status.State != a2a.TaskStateInputRequired {
				t.Errorf("the first answer: %T %+v %v, want the task input-required", r.res, r.res, r.err)
			}
			bank = send("Left bank")
			select {
			case bankCtx = <-running:
			case <-ctx.Done():
				t.Errorf("the second answer's turn did not start: %v", ctx.Err())
			}
		})
	})

	got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatalf("CancelTask: %v", err)
	}
	if bankCtx == nil {
		t.Fatal("the hooks did not run both answers")
	}
	if bankCtx.Err() == nil {
		t.Error("the cancel did not stop the second answer's turn")
	}
	if got.Status.State != a2a.TaskStateCanceled {
		t.Errorf("CancelTask answered %s, want canceled", got.Status.State)
	}
	r := <-bank
	if at, ok := r.res.(*a2a.Task); r.err != nil || !ok || at.Status.State != a2a.TaskStateCanceled {
		t.Errorf("the second answer: %T %+v %v, want the task canceled", r.res, r.res, r.err)
	}
	if g, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID}); err != nil || g.Status.State != a2a.TaskStateCanceled {
		t.Errorf("GetTask at the end: %+v %v, want canceled", g, err)
	}
}

// stalledCanceller is a handler whose cancel turns (agent.TurnCanceller)
// wait for release: the cancel turn is published and picked up, its final
// frame not written yet. Serve asks for input on an AskInputPrefix message
// and reports any other message on served.
type stalledCanceller struct {
	told    chan *e2a.Envelope // a cancel turn's envelope, once told
	release chan struct{}      // lets the cancel turns end
	served  chan string        // the text of every other message served
}

func (h *stalledCanceller) Serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	if strings.HasPrefix(demo.Text(env), demo.AskInputPrefix) {
		return agent.Interrupt(w, e2a.StateInputRequired, "Which city?")
	}
	select {
	case h.served <- demo.Text(env):
	case <-ctx.Done():
	}
	return nil
}

func (h *stalledCanceller) CancelTurn(ctx context.Context, env *e2a.Envelope) error {
	select {
	case h.told <- env:
	case <-ctx.Done():
		return nil
	}
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return nil
}

// TestCancelTurnRecordedRefusesTheAnswer: the client's answer to an
// input-required task arrives once the cancel turn is appended to the
// task's record (and published), before its final frame is stored (the
// agent is told of the cancel turn and holds it). The task is terminal
// from the cancel turn on: the answer is refused as to a task in a
// terminal state (ErrUnsupportedOperation, nothing published), never queued
// behind the cancel turn to run after it, and the task stays canceled. So
// for A2A's own message and for AgentVault's tasks/send naming the A2A
// task (docs/protocols.md: refused as A2A's own message is), which was
// taken: its turn was checked as an AgentVault task's, which continues
// whatever its state, and the canceled task ran again.
func TestCancelTurnRecordedRefusesTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name string
		// answer sends "Paris" to the task and reports whether it was
		// accepted, the refusal wanted otherwise.
		answer func(t *testing.T, ctx context.Context, pp *pipetest.Pipeline, c *a2aclient.Client, task *a2a.Task) (accepted bool)
	}{
		{"a2a v1.0", func(t *testing.T, ctx context.Context, _ *pipetest.Pipeline, c *a2aclient.Client, task *a2a.Task) bool {
			answer := v1Answer(task, "Paris")
			answer.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
			ares, aerr := c.SendMessage(ctx, answer)
			if !errors.Is(aerr, a2a.ErrUnsupportedOperation) {
				t.Errorf("the answer after the cancel turn: %T %+v, %v; want ErrUnsupportedOperation (a task in a terminal state)", ares, ares, aerr)
			}
			return aerr == nil
		}},
		{"agentvault", func(t *testing.T, _ context.Context, pp *pipetest.Pipeline, _ *a2aclient.Client, task *a2a.Task) bool {
			_, b := do(t, http.MethodPost, pp.URL+"/a2a", `{"jsonrpc":"2.0","id":"av-answer","method":"tasks/send","params":{"id":"`+string(task.ID)+
				`","message":{"role":"user","parts":[{"type":"text","content":"Paris"}]}}}`, "Content-Type", "application/json")
			var answer struct {
				Error *struct{ Code int } `json:"error"`
			}
			err := json.Unmarshal(b, &answer)
			if err != nil || answer.Error == nil || answer.Error.Code != -32004 {
				t.Errorf("AgentVault tasks/send after the cancel turn: %s; want -32004 (the A2A task is terminal)", b)
			}
			return err == nil && answer.Error == nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { cancelTurnThenAnswer(t, tc.answer) })
	}
}

func cancelTurnThenAnswer(t *testing.T, send func(*testing.T, context.Context, *pipetest.Pipeline, *a2aclient.Client, *a2a.Task) bool) {
	pp := pipetest.Start(t)
	h := &stalledCanceller{told: make(chan *e2a.Envelope, 1), release: make(chan struct{}), served: make(chan string, 1)}
	pp.Pool("demo", h)
	released := sync.OnceFunc(func() { close(h.release) })
	defer released()
	ctx, c, task := askInput(t, pp)

	type cancelled struct {
		task *a2a.Task
		err  error
	}
	cancelDone := make(chan cancelled, 1)
	go func() {
		got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
		cancelDone <- cancelled{got, err}
	}()
	var turn *e2a.Envelope
	select {
	case turn = <-h.told:
	case r := <-cancelDone:
		t.Fatalf("CancelTask returned before its cancel turn reached the agent: %+v %v", r.task, r.err)
	case <-ctx.Done():
		t.Fatal("the cancel turn did not reach the agent")
	}
	if turn.TaskID != string(task.ID) || turn.Method != e2a.MethodCancelTurn {
		t.Fatalf("told of %q (task %q), want the cancel turn of %q", turn.Method, turn.TaskID, task.ID)
	}

	accepted := send(t, ctx, pp, c, task)

	released()
	r := <-cancelDone
	if r.err != nil || r.task.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask: %+v %v, want the task canceled", r.task, r.err)
	}
	if accepted {
		// The answer was queued behind the cancel turn: it runs after it.
		select {
		case text := <-h.served:
			g, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
			if err != nil {
				t.Fatal(err)
			}
			t.Fatalf("the answer %q ran after the cancel turn; GetTask then: %s", text, g.Status.State)
		case <-ctx.Done():
			t.Fatal("the accepted answer did not run")
		}
	}
	select {
	case text := <-h.served:
		t.Errorf("the agent served %q after the cancel turn", text)
	default:
	}
	if g, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID}); err != nil || g.Status.State != a2a.TaskStateCanceled {
		t.Errorf("GetTask at the end: %+v %v, want canceled", g, err)
	}
}
