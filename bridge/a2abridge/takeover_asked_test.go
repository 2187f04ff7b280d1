package a2abridge_test

import (
	"context"
	"iter"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// slowAnswerAgent asks for a name (input-required, its question message
// "q"); the answer's turn first writes "Hello, " in artifact "reply",
// the task still input-required with the question (no status update
// yet: a model thinking), then, once release is closed, works and
// completes with "Hello, <name>". held is closed when the answer's turn
// waits.
type slowAnswerAgent struct {
	held, release chan struct{}
	once          *sync.Once
}

func (e slowAnswerAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil {
			q := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("What is your name?"))
			q.ID = "q"
			_ = yield(a2a.NewSubmittedTask(ec, ec.Message), nil) &&
				yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, q), nil)
			return
		}
		reply := func(appendTo bool, text string) *a2a.TaskArtifactUpdateEvent {
			ev := a2a.NewArtifactUpdateEvent(ec, "reply", a2a.NewTextPart(text))
			ev.Append = appendTo
			return ev
		}
		if !yield(reply(false, "Hello, "), nil) {
			return
		}
		e.once.Do(func() { close(e.held) })
		select {
		case <-e.release:
		case <-ctx.Done():
			return
		}
		_ = yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) &&
			yield(reply(true, up.TextOf(ec.Message.Parts)), nil) &&
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (slowAnswerAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// readWatch is the agent's request handler, which closes read once armed
// and a worker read the task: the first event of a subscription passed
// on, or a GetTask answered.
type readWatch struct {
	a2asrv.RequestHandler
	armed atomic.Bool
	read  chan struct{}
	once  sync.Once
}

func (h *readWatch) seen() {
	if h.armed.Load() {
		h.once.Do(func() { close(h.read) })
	}
}

func (h *readWatch) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		for ev, err := range h.RequestHandler.SubscribeToTask(ctx, req) {
			ok := yield(ev, err)
			h.seen()
			if !ok {
				return
			}
		}
	}
}

func (h *readWatch) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	task, err := h.RequestHandler.GetTask(ctx, req)
	h.seen()
	return task, err
}

// TestTakeoverOfAnsweredQuestion: the answer to the agent's question
// (a continuation) is taken over while the agent, its message taken up,
// has written part of its reply but not yet moved its task on from the
// question: the snapshot the worker taking over reads first still shows
// it (input-required, the same message and timestamp). That is not the
// turn's end, as it is not for the worker that sent the answer: the turn
// goes on and completes with the agent's reply. The taking-over worker
// ended it input-required with the question already answered (the
// record kept no trace of the status the continuation found), streaming
// and polled alike.
func TestTakeoverOfAnsweredQuestion(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name      string
		streaming bool
	}{{"stream", true}, {"polled", false}} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			exec := slowAnswerAgent{held: make(chan struct{}), release: make(chan struct{}), once: new(sync.Once)}
			h := &readWatch{RequestHandler: a2asrv.NewHandler(exec), read: make(chan struct{})}
			url := serveA2ACard(t, h, v.streaming)
			tk := &takeover{p: pipetest.Start(t), events: make(chan a2a.Event, 1024), errs: make(chan error, 1)}
			tk.stopA = tk.worker(t, url)
			c := v1Client(t, tk.p, "agent")
			first := up.Collect(t, c.SendStreamingMessage(testCtx(t), &a2a.SendMessageRequest{Message: userMessage("hi")}), nil)
			if first.State() != a2a.TaskStateInputRequired || first.Status != "What is your name?" {
				t.Fatalf("first turn ended %s %q", first.State(), first.Status)
			}
			ans := userMessage("Ada")
			ans.TaskID, ans.ContextID = first.Task.TaskID, first.Task.ContextID
			go func() {
				defer close(tk.events)
				for ev, err := range c.SendStreamingMessage(testCtx(t), &a2a.SendMessageRequest{Message: ans}) {
					if err != nil {
						tk.errs <- err
						return
					}
					tk.events <- ev
				}
			}()
			<-exec.held
			turn := up.NewTurn()
			tk.killAfter(t, turn, 1) // worker A wrote "Hello, " (the task recorded before)
			h.armed.Store(true)
			tk.worker(t, url) // worker B
			<-h.read          // B read the task still asking
			close(exec.release)
			tk.finish(t, turn)
			if turn.State() != a2a.TaskStateCompleted || turn.Text("reply") != "Hello, Ada" {
				t.Errorf("the answered turn after the takeover: %s %q (status %q), want completed %q",
					turn.State(), turn.Text("reply"), turn.Status, "Hello, Ada")
			}
		})
	}
}
