package a2abridge_test

import (
	"context"
	"iter"
	"net/http"
	"testing"

	legacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// doneAgent answers "Hello" in artifact "answer" and completes its task
// with a status message (id "done"): "All done.".
type doneAgent struct{}

func (doneAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		done := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("All done."))
		done.ID = "done"
		answer := a2a.NewArtifactUpdateEvent(ec, "answer", a2a.NewTextPart("Hello"))
		answer.Append = false
		_ = yield(a2a.NewSubmittedTask(ec, ec.Message), nil) &&
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) &&
			yield(answer, nil) &&
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, done), nil)
	}
}

func (doneAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// diesAtComplete is a bridge worker that dies as the answer ends: the
// frames before e2a.complete stored (Sync), it closes held and writes
// nothing more (its final frame never comes). With chunk, it dies so
// right after the text chunk chunk instead, or after the agent's
// status-update whose message's text is chunk.
type diesAtComplete struct {
	*bridge.Handler
	held  chan struct{}
	chunk string
}

// takenOver is the stored answer of request reqID to the A2A agent at url
// whose first worker (diesAtComplete, chunk as there) dies; a second
// worker takes the request over.
func takenOver(t *testing.T, url, reqID, chunk string) pipetest.Answer {
	t.Helper()
	tk := &takeover{p: pipetest.Start(t)}
	held := make(chan struct{})
	stopA := tk.serve(t, diesAtComplete{Handler: newHandler(t, tk.p, "agent", url), held: held, chunk: chunk})
	body := `{"request_id":"` + reqID + `","params":{"text":"hi"}}`
	resp, b := testkit.Do(t, http.MethodPost, tk.p.URL+"/pools/agent/v1/requests", body, "Content-Type", "application/json")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	<-held
	stopA()
	tk.worker(t, url) // worker B
	return stored(t, tk.p)
}

func (h diesAtComplete) Serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	return h.Handler.Serve(ctx, env, &heldComplete{Writer: w, ctx: ctx, held: h.held, chunk: h.chunk})
}

type heldComplete struct {
	agent.Writer
	ctx   context.Context
	held  chan struct{}
	chunk string
}

func (w *heldComplete) Complete(result any) error {
	if w.chunk != "" {
		return w.Writer.Complete(result)
	}
	return w.die()
}

func (w *heldComplete) Chunk(kind string, delta any) error {
	if err := w.Writer.Chunk(kind, delta); err != nil || w.chunk == "" || kind != e2a.DeltaText || delta != w.chunk {
		return err
	}
	return w.die()
}

func (w *heldComplete) Write(kind, status string, body any, final bool) error {
	if err := w.Writer.Write(kind, status, body, final); err != nil || w.chunk == "" {
		return err
	}
	b, ok := body.(e2a.StreamEventBody)
	if !ok || b.Branch != e2a.BranchStatusUpdate {
		return nil
	}
	su, ok := b.Payload.(*legacy.TaskStatusUpdateEvent)
	if !ok || su.Status.Message == nil {
		return nil
	}
	text := ""
	for _, p := range su.Status.Message.Parts {
		if tp, ok := p.(legacy.TextPart); ok {
			text += tp.Text
		}
	}
	if text != w.chunk {
		return nil
	}
	return w.die()
}

// die stores the frames written (Sync), closes held and writes nothing
// more.
func (w *heldComplete) die() error {
	if err := w.Sync(); err != nil {
		return err
	}
	close(w.held)
	<-w.ctx.Done()
	return w.ctx.Err()
}

// TestTakeoverAfterCompletedMessage: the worker writing the agent's
// completed status, its message ("All done.") written, dies before its
// e2a.complete; the worker taking the request over finds the task ended
// (GetTask) and completes the request without writing the message again:
// the client reads "All done." once, and so says the result's text. It
// was written twice.
func TestTakeoverAfterCompletedMessage(t *testing.T) {
	t.Parallel()
	url, _ := startV1(t, doneAgent{})
	a := takenOver(t, url, "done-once", "")
	const want = "HelloAll done."
	f := a.Final()
	if f == nil || f.ResponseKind != e2a.KindComplete {
		t.Fatalf("after the takeover: final %v, want e2a.complete", f)
	}
	if got := a.Text(e2a.DeltaText); got != want {
		t.Errorf("after the takeover the client reads %q, want %q", got, want)
	}
	c, err := f.Complete()
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := c.Result.(map[string]any); res["text"] != want {
		t.Errorf("the result's text %q, want %q", res["text"], want)
	}
}
