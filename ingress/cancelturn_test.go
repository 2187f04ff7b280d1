package ingress_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

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
	p := &pipeline{url: pp.URL, nc: pp.NC, js: pp.JS, in: pp.Ingress}
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	res, err := c.SendMessage(ctx, userMessage(demo.AskInputPrefix+" the city"))
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("result %T %+v, want an input-required task", res, res)
	}

	type result struct {
		res a2a.SendMessageResult
		err error
	}
	answered := make(chan result, 1)
	var answerCtx context.Context
	var once sync.Once
	ingress.SetCancelTurnHook(t, func(taskID string) {
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
