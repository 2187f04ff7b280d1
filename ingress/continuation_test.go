package ingress_test

import (
	"context"
	"strings"
	"testing"
	"time"

	a2av03 "github.com/a2aproject/a2a-go/a2a"
	a2aclientv03 "github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// askerPipeline is a pipeline whose default pool "asker" is a Go handler
// (agent runtime) that asks for input with agent.Interrupt when told "the
// weather", and answers anything else the common way, one text chunk and
// Complete ("Hello, <text>").
func askerPipeline(t *testing.T) *pipetest.Pipeline {
	t.Helper()
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("asker")))
	p.Pool("asker", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		text, _ := env.Params["text"].(string)
		if text == "the weather" {
			return agent.Interrupt(w, e2a.StateInputRequired, "Which city?")
		}
		if err := w.Chunk(e2a.DeltaText, "Hello, "+text); err != nil {
			return err
		}
		return w.Complete(nil)
	}))
	return p
}

// v03ClientAt builds the a2a-go v0.3 client from the agent card at url.
func v03ClientAt(t *testing.T, url string) *a2aclientv03.Client {
	t.Helper()
	ctx := context.Background()
	card, err := agentcard.NewResolver(nil).Resolve(ctx, url)
	if err != nil {
		t.Fatalf("resolve card: %v", err)
	}
	c, err := a2aclientv03.NewFromCard(ctx, card)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// askedV03 sends text as a new message over A2A v0.3 and returns the task
// the agent answered it with, failing t unless it asks for input (the v0.3
// twin of up.Asked).
func askedV03(t *testing.T, ctx context.Context, c *a2aclientv03.Client, text string) *a2av03.Task {
	t.Helper()
	res, err := c.SendMessage(ctx, &a2av03.MessageSendParams{Message: a2av03.NewMessage(a2av03.MessageRoleUser, a2av03.TextPart{Text: text})})
	if err != nil {
		t.Fatal(err)
	}
	asked, ok := res.(*a2av03.Task)
	if !ok || asked.Status.State != a2av03.TaskStateInputRequired {
		t.Fatalf("question: %T %+v", res, res)
	}
	return asked
}

// sentV03 sends text as a new message with a2a-go v0.3's client c
// (message/send, blocking) and returns the task it answers, completed.
func sentV03(t *testing.T, ctx context.Context, c *a2aclientv03.Client, text string) *a2av03.Task {
	t.Helper()
	res, err := c.SendMessage(ctx, &a2av03.MessageSendParams{Message: a2av03.NewMessage(a2av03.MessageRoleUser, a2av03.TextPart{Text: text})})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2av03.Task)
	if !ok || task.Status.State != a2av03.TaskStateCompleted {
		t.Fatalf("message/send: %T %+v", res, res)
	}
	return task
}

// TestContinuationAnsweredWithTheTask: a Go handler asks for input with
// agent.Interrupt, then answers the client's answer the common way, a
// text and Complete. The A2A v1.0 client (a2a-go/v2) answered the question
// naming task T (SendMessage, blocking): the task exists and is stored, so
// the answer must be the Task T, now completed, as GetTask then shows it,
// never a bare Message outside the task (a2a-go/v2's own server refuses a
// Message after a task was stored: internal/taskupdate/manager.go). The
// direct Message answers only a message that created no task.
func TestContinuationAnsweredWithTheTask(t *testing.T) {
	p := askerPipeline(t)
	c := up.Client(t, p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	task := up.Asked(t, ctx, c, up.Msg("the weather"))
	res, err := c.SendMessage(ctx, up.Reply(task, "Paris"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("GetTask after the answer: %+v %v", got, err)
	}
	done, ok := res.(*a2a.Task)
	if !ok || done.ID != task.ID || done.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("SendMessage answering input-required task %s returned %T %+v; want the Task %s, completed (as GetTask shows it), not a Message outside the task", task.ID, res, res, task.ID)
	}
	if len(done.History) != len(got.History) || len(done.Artifacts) != len(got.Artifacts) || v1Text(done.Artifacts[0].Parts) != "Hello, Paris" {
		t.Fatalf("SendMessage's Task %+v, want it as GetTask shows it: %+v", done, got)
	}
	// A first message answered directly stays a Message.
	if res, err := c.SendMessage(ctx, up.Msg("Lyon")); err != nil {
		t.Fatal(err)
	} else if m, ok := res.(*a2a.Message); !ok || v1Text(m.Parts) != "Hello, Lyon" {
		t.Fatalf("a new message answered with %T %+v, want the agent's Message", res, res)
	}
}

// TestContinuationAnsweredWithTheTaskV03: the same over A2A v0.3
// message/send (a2a-go v0.3 client): the answer on the task is the Task,
// completed, its history holding the whole conversation as tasks/get
// shows it.
func TestContinuationAnsweredWithTheTaskV03(t *testing.T) {
	p := askerPipeline(t)
	c := v03ClientAt(t, p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	asked := askedV03(t, ctx, c, "the weather")
	res, err := c.SendMessage(ctx, answerFor(asked.ID, asked.ContextID, "Paris"))
	if err != nil {
		t.Fatal(err)
	}
	done, ok := res.(*a2av03.Task)
	if !ok || done.ID != asked.ID || done.Status.State != a2av03.TaskStateCompleted {
		t.Fatalf("message/send answering input-required task %s returned %T %+v; want the Task, completed", asked.ID, res, res)
	}
	got, err := c.GetTask(ctx, &a2av03.TaskQueryParams{ID: asked.ID})
	if err != nil || got.Status.State != a2av03.TaskStateCompleted {
		t.Fatalf("tasks/get after the answer: %+v %v", got, err)
	}
	if h := v03History(done.History); h != v03History(got.History) || !strings.Contains(h, "user: the weather") || !strings.Contains(h, "Which city?") || !strings.Contains(h, "user: Paris") {
		t.Fatalf("message/send's Task history [%s], want the conversation as tasks/get shows it [%s]", h, v03History(got.History))
	}
}

// TestV03NonBlockingAnswerIsTheTask: A2A v0.3 message/send with
// configuration.blocking false answers "the current state of the task"
// (a Task): for the answer to an input-required task it holds the task's
// history, as tasks/get does at that moment, not the new message alone.
func TestV03NonBlockingAnswerIsTheTask(t *testing.T) {
	p := startPipeline(t)
	_, c := a2aClient(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := demo.Question(e2a.StateInputRequired, "the weather")
	asked := askedV03(t, ctx, c, "ask:input the weather")
	no := false
	ans := answerFor(asked.ID, asked.ContextID, "Paris")
	ans.Message.Metadata = map[string]any{"delay_ms": 200}
	ans.Config = &a2av03.MessageSendConfig{Blocking: &no}
	res, err := c.SendMessage(ctx, ans)
	if err != nil {
		t.Fatalf("non-blocking answer: %v", err)
	}
	got, ok := res.(*a2av03.Task)
	if !ok || got.ID != asked.ID {
		t.Fatalf("non-blocking answer result %T %+v", res, res)
	}
	h := v03History(got.History)
	if !strings.Contains(h, "user: ask:input the weather") || !strings.Contains(h, q) || !strings.Contains(h, "user: Paris") {
		t.Fatalf("message/send (blocking false) answering input-required task %s returned a Task with history [%s]; "+
			"want the task's current state, its history holding the first message, the agent's question and the answer, as tasks/get shows it", asked.ID, h)
	}
}

// v03History is a v0.3 task history as "role: text" joined by " | ".
func v03History(h []*a2av03.Message) string {
	var out []string
	for _, m := range h {
		out = append(out, string(m.Role)+": "+textOf(m.Parts))
	}
	return strings.Join(out, " | ")
}

// TestV1ReturnImmediatelyAnswerIsTheTask: A2A v1.0 SendMessage with
// returnImmediately answering an input-required task answers the task as
// GetTask shows it at that moment: its history holds the first message,
// the agent's question and the answer.
func TestV1ReturnImmediatelyAnswerIsTheTask(t *testing.T) {
	p := askerPipeline(t)
	c := up.Client(t, p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	task := up.Asked(t, ctx, c, up.Msg("the weather"))
	ans := up.Reply(task, "Paris")
	ans.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	res, err := c.SendMessage(ctx, ans)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := res.(*a2a.Task)
	if !ok || got.ID != task.ID {
		t.Fatalf("returnImmediately answer %T %+v", res, res)
	}
	var h []string
	for _, m := range got.History {
		h = append(h, string(m.Role)+": "+v1Text(m.Parts))
	}
	if s := strings.Join(h, " | "); !strings.Contains(s, "the weather") || !strings.Contains(s, "Which city?") || !strings.Contains(s, "Paris") {
		t.Fatalf("SendMessage (returnImmediately) answering input-required task %s returned history [%s]; want the task as GetTask shows it", task.ID, s)
	}
}
