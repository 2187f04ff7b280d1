package ingress_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// The answers that meet CancelTask's mark (the task's running turn marked
// as the one whose cancel ends the task, before the cancel is sent:
// cancelRunning). Each test holds the cancel once it has marked the
// running answer A1 (ingress.SetCancelMarkedHook), sends the answer A2,
// which meets the mark (SetMarkMetHook), and ends A1 one way or another
// before the cancel goes on.

// markRun is a task whose answer A1 (request a1) runs, held by the gate.
type markRun struct {
	pp   *pipetest.Pipeline
	g    *answerGate
	c    *a2aclient.Client
	ctx  context.Context
	task *a2a.Task
	a1   string
}

// underMark starts a markRun, then sends A2 while CancelTask holds its
// mark of A1 and, once A2 has met the mark, calls end in the cancel's
// goroutine (before the cancel reaches A1), then lets the cancel go on.
// A2 answered before it met the mark (refused at once) is an error. It
// returns the run, A2's result and CancelTask's.
func underMark(t *testing.T, end func(m *markRun)) (*markRun, answerResult, *a2a.Task, error) {
	t.Helper()
	pp, g, c, ctx, task, a1, _ := heldAnswerTask(t, true)
	m := &markRun{pp, g, c, ctx, task, a1}
	met := make(chan struct{})
	var metOnce sync.Once
	ingress.SetMarkMetHook(pp.Ingress, func(id, _, marked string) {
		if id == string(task.ID) && marked == a1 {
			metOnce.Do(func() { close(met) })
		}
	})
	a2 := make(chan answerResult, 1)
	var markOnce sync.Once
	ingress.SetCancelMarkedHook(pp.Ingress, func(id, requestID string) {
		if id != string(task.ID) || requestID != a1 {
			return
		}
		markOnce.Do(func() {
			r := sendAnswer(ctx, c, task, "A2", true)
			select {
			case <-met:
			case got := <-r:
				t.Errorf("A2, sent while the cancel's mark of the running A1 stood, answered before A1 ended: %+v %v", got.res, got.err)
				a2 <- got
				return
			case <-time.After(30 * time.Second):
				t.Error("A2 did not reach the mark")
			}
			end(m)
			go func() { a2 <- <-r }()
		})
	})
	got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	return m, testkit.Receive(t, a2, 30*time.Second, "A2's answer"), got, err
}

// TestAnswerUnderMarkTakenWhenTurnAsks: CancelTask marks the running
// answer A1; A2 is sent then and meets the mark; A1 ends input-required
// before the cancel reaches it (the cancel stops nothing and takes its
// mark back). A2 was refused at once, as to a terminal task, though the
// task was input-required, waiting for just such an answer. It awaits
// A1's end now (appendPastMark) and is taken: the task's running turn,
// which the cancel, going on, cancels (CancelTask answers canceled, A2
// does not run on).
func TestAnswerUnderMarkTakenWhenTurnAsks(t *testing.T) {
	m, a2, got, err := underMark(t, func(m *markRun) {
		appended := make(chan struct{})
		var once sync.Once
		ingress.SetAppendedHook(m.pp.Ingress, func(_, id, requestID string) {
			if id == string(m.task.ID) && requestID != m.a1 {
				once.Do(func() { close(appended) })
			}
		})
		m.g.ask("A1")
		awaitFinished(m.ctx, t, m.pp, m.a1)
		// A2 is appended once A1 has ended, before the cancel goes on
		// (which then finds A2 the task's newest turn).
		select {
		case <-appended:
		case <-time.After(30 * time.Second):
			t.Error("A2 was not appended after A1 asked for input")
		}
	})
	if a2.err != nil {
		t.Fatalf("A2, sent under the mark of A1, which then asked for input: %v, want it taken", a2.err)
	}
	canceledWithA2Queued(t, got, err, m.g)
}

// TestAnswerUnderMarkRefusedOnceCanceled: CancelTask marks the running
// answer A1; A2 is sent then and meets the mark; the cancel stops A1. A2
// is refused as to a terminal task, as before, but once A1's final frame
// has it canceled, not at once (the cancel's outcome was not known).
func TestAnswerUnderMarkRefusedOnceCanceled(t *testing.T) {
	m, a2, got, err := underMark(t, func(*markRun) {})
	if !errors.Is(a2.err, a2a.ErrUnsupportedOperation) {
		t.Errorf("A2, sent under the mark of A1, which the cancel stopped: %+v %v, want it refused as to a terminal task", a2.res, a2.err)
	}
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask: %v %v, want the task canceled", got, err)
	}
	if !ingress.Finished(m.ctx, m.pp.Ingress, m.a1) {
		t.Error("A2 refused before A1's final frame")
	}
}

// TestAnswerUnderMarkRefusedOnceCompleted: CancelTask marks the running
// answer A1; A2 is sent then and meets the mark; A1 completes before the
// cancel reaches it. A2 is refused as to a terminal task once A1's final
// frame has it completed (not at once, while A1 ran: without the cancel
// it would have been taken then); CancelTask is refused, the task
// completed.
func TestAnswerUnderMarkRefusedOnceCompleted(t *testing.T) {
	m, a2, got, err := underMark(t, func(m *markRun) {
		m.g.done("A1")
		awaitFinished(m.ctx, t, m.pp, m.a1)
	})
	if !errors.Is(a2.err, a2a.ErrUnsupportedOperation) {
		t.Errorf("A2, sent under the mark of A1, which then completed: %+v %v, want it refused as to a terminal task", a2.res, a2.err)
	}
	if !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Errorf("CancelTask: %v %v, want it refused, the task completed", got, err)
	}
	final, gerr := m.c.GetTask(m.ctx, &a2a.GetTaskRequest{ID: m.task.ID})
	if gerr != nil || final.Status.State != a2a.TaskStateCompleted {
		t.Errorf("GetTask: %v %v, want the task completed", final, gerr)
	}
}
