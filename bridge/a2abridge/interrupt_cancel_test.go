package a2abridge_test

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// formAgent ends its turn input-required with a question whose message
// holds a text part (unless text is "") and a DataPart (a form to fill
// in: A2A's usual way of asking for structured input).
type formAgent struct{ text string }

func (f formAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		form := a2a.NewDataPart(map[string]any{"slot_form": map[string]any{"slots": []any{"09:00", "10:00"}}})
		parts := []*a2a.Part{form}
		if f.text != "" {
			parts = append([]*a2a.Part{a2a.NewTextPart(f.text)}, parts...)
		}
		q := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, parts...)
		_ = yield(a2a.NewSubmittedTask(ec, ec.Message), nil) &&
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, q), nil)
	}
}

func (formAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// TestInputRequiredKeepsDataPart: an upstream's input-required status
// message with a DataPart (the form the user must fill in) reaches the
// client, in the stored interrupt frame and in the A2A client's
// input-required status message, with its text or without any. The
// bridge used to pass only the message's text to agent.Interrupt, and the
// form was lost (a message of a form alone interrupted with no message).
func TestInputRequiredKeepsDataPart(t *testing.T) {
	t.Parallel()
	for _, question := range []string{"Pick a slot", ""} {
		t.Run(fmt.Sprintf("text=%q", question), func(t *testing.T) {
			t.Parallel()
			url, _ := startV1(t, formAgent{text: question})
			p := pipetest.Start(t)
			bridgePool(t, p, "agent", url)

			a := p.Ask(t, "agent", `{"params":{"text":"book a meeting"}}`)
			f := a.Final()
			if f == nil {
				t.Fatal("no final frame")
			}
			state, text, ok := f.Interrupt()
			if !ok || state != "input-required" || text != question {
				t.Fatalf("final %s %s: not the agent's input-required (%s %q)", f.ResponseKind, f.Body, state, text)
			}
			if !strings.Contains(string(f.Body), "slot_form") {
				t.Errorf("the interrupt frame lost the agent's DataPart (its form): %s", f.Body)
			}

			c := v1Client(t, p, "agent")
			res, err := c.SendMessage(testCtx(t), &a2a.SendMessageRequest{Message: userMessage("book a meeting")})
			if err != nil {
				t.Fatal(err)
			}
			task, ok := res.(*a2a.Task)
			if !ok {
				t.Fatalf("SendMessage answered %T, want a Task", res)
			}
			if task.Status.State != a2a.TaskStateInputRequired || task.Status.Message == nil {
				t.Fatalf("A2A client: task %s, message %v", task.Status.State, task.Status.Message)
			}
			var data bool
			for _, part := range task.Status.Message.Parts {
				if d, ok := part.Content.(a2a.Data); ok {
					if m, _ := d.Value.(map[string]any); m["slot_form"] != nil {
						data = true
					}
				}
			}
			if !data {
				t.Errorf("the A2A client's input-required message has no DataPart (the form): %d parts", len(task.Status.Message.Parts))
			}
		})
	}
}

// latePolled is an agent that does not stream (its card says so) and
// takes a while before its first event (a model loading, a queue): its
// execution starts, waits for gate, then makes its task and sends a chunk
// every 20 ms until canceled. Cancels are recorded.
type latePolled struct {
	started chan struct{}
	gate    chan struct{}
	cancels chan a2a.TaskID
	emitted *atomic.Int64
}

func (e latePolled) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		close(e.started)
		select {
		case <-e.gate:
		case <-ctx.Done():
			return
		}
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) || !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 1; i <= 1000; i++ {
			ev := a2a.NewArtifactUpdateEvent(ec, "ticks", a2a.NewTextPart("tick "))
			ev.Append = i > 1
			if !yield(ev, nil) {
				return
			}
			e.emitted.Add(1)
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (e latePolled) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		e.cancels <- ec.TaskID
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// serveNoStreaming serves h on JSON-RPC with a v1.0 card whose
// capabilities.streaming is false: the bridge sends with
// returnImmediately and polls GetTask.
func serveNoStreaming(t *testing.T, h a2asrv.RequestHandler) string {
	t.Helper()
	return serveA2ACard(t, h, false)
}

// TestPolledCancelBeforeTheTaskIsKnown: the polled twin of
// TestCancelBeforeTheTaskIsKnown. A request to an agent that does not
// stream, cancelled while its SendMessage (returnImmediately: answered at
// the agent's first event) had not been answered, still has the agent's
// task cancelled: the bridge waits (bounded) for the answer on after the
// cancel and cancels the task it names. sendAndPoll used to drop the
// SendMessage at once, forwardCancel found no task id, and the agent's
// task ran on for nobody.
func TestPolledCancelBeforeTheTaskIsKnown(t *testing.T) {
	t.Parallel()
	exec := latePolled{started: make(chan struct{}), gate: make(chan struct{}), cancels: make(chan a2a.TaskID, 4), emitted: new(atomic.Int64)}
	url := serveNoStreaming(t, a2asrv.NewHandler(exec))
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", url)
	cancelOnceStarted(t, p, exec.started, "a long job")
	cancelledBeforeTask(t, p, exec.gate, exec.cancels, exec.emitted)
}
