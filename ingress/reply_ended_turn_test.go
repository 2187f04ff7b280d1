package ingress_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	a2av03 "github.com/a2aproject/a2a-go/a2a"
	a2aclientv03 "github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// replier asks "Which city?" (agent.Interrupt) when told "the weather",
// and answers anything else with its own Message (agent.Reply, the
// documented way for an agent to answer with text).
var replier = agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	text, _ := env.Params["text"].(string)
	if text == "the weather" {
		return agent.Interrupt(w, e2a.StateInputRequired, "Which city?")
	}
	return agent.Reply(w, "Hello, "+text)
})

// replierPipeline: pool "asker", the default, served by replier.
func replierPipeline(t *testing.T, opts ...ingress.Option) *pipetest.Pipeline {
	t.Helper()
	p := pipetest.Start(t, pipetest.WithIngress(append([]ingress.Option{ingress.WithDefaultPool("asker")}, opts...)...))
	p.Pool("asker", replier)
	return p
}

// replierAsked asks replierPipeline's pool its question over A2A v1.0
// and returns the call's context (30 s), the client and the
// input-required task.
func replierAsked(t *testing.T) (context.Context, *a2aclient.Client, *a2a.Task) {
	t.Helper()
	c := up.Client(t, replierPipeline(t).URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx, c, up.Asked(t, ctx, c, up.Msg("the weather"))
}

// replierAskedV03 is replierAsked over A2A v0.3 (a2a-go v0.3's client).
func replierAskedV03(t *testing.T) (context.Context, *a2aclientv03.Client, *a2av03.Task) {
	t.Helper()
	c := v03ClientAt(t, replierPipeline(t).URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx, c, askedV03(t, ctx, c, "the weather")
}

// TestContinuationEndedByAgentReplyIsCompleted: the answer to an
// input-required task that the agent ends with agent.Reply (a final
// a2a.message frame, succeeded) completes the task: blocking SendMessage
// (a2a-go/v2) answers with the Task, completed, and GetTask says
// completed too (A2A v1.0 §3.1.1 / §6.3: a Task's final state; a task
// left "working" forever makes a polling client wait forever).
func TestContinuationEndedByAgentReplyIsCompleted(t *testing.T) {
	ctx, c, task := replierAsked(t)
	res, err := c.SendMessage(ctx, up.Reply(task, "Paris"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	done, ok := res.(*a2a.Task)
	if !ok || done.Status.State != a2a.TaskStateCompleted || got.Status.State != a2a.TaskStateCompleted {
		st := a2a.TaskState("")
		if ok {
			st = done.Status.State
		}
		t.Fatalf("answer ended by agent.Reply: SendMessage returned %T state %q, GetTask state %q; want the Task completed in both (the agent's turn succeeded)", res, st, got.Status.State)
	}
}

// TestContinuationHistoryLengthZeroHasNoHistory: SendMessage continuing a task
// with configuration.historyLength 0 gets the Task with no history
// message (A2A v1.0 SendMessageConfiguration.history_length: "0 ... not
// include any messages"; the server MUST NOT return more).
func TestContinuationHistoryLengthZeroHasNoHistory(t *testing.T) {
	p := askerPipeline(t)
	c := up.Client(t, p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	task := up.Asked(t, ctx, c, up.Msg("the weather"))
	zero := 0
	req := up.Reply(task, "Paris")
	req.Config = &a2a.SendMessageConfig{HistoryLength: &zero}
	res, err := c.SendMessage(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	done, ok := res.(*a2a.Task)
	if !ok || len(done.History) != 0 || done.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("historyLength 0 continuation answered %T %+v; want the completed Task with an empty history", res, res)
	}
	if len(done.Artifacts) != 1 || v1Text(done.Artifacts[0].Parts) != "Hello, Paris" {
		t.Fatalf("historyLength 0 continuation: artifacts %+v, want the turn's reply artifact", done.Artifacts)
	}
}

// TestContinuationOfAnotherPrincipalsTaskNotFound: bob answering alice's
// input-required task (its id known) gets TaskNotFound, and alice's task
// is untouched (still input-required, bob's text nowhere in it).
func TestContinuationOfAnotherPrincipalsTaskNotFound(t *testing.T) {
	const aliceKey, bobKey = "ak_reply_alice_0123456789", "ak_reply_bob_000123456789"
	auth := pipetest.KeyAuth(t, map[string]string{"alice": aliceKey, "bob": bobKey}, nil)
	p := replierPipeline(t, ingress.WithAuth(auth))
	c := up.Client(t, p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	task := up.Asked(t, up.WithAPIKey(ctx, aliceKey), c, up.Msg("the weather"))
	_, err := c.SendMessage(up.WithAPIKey(ctx, bobKey), up.Reply(task, "Paris"))
	if !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("bob continuing alice's task %s: err %v; want TaskNotFound", task.ID, err)
	}
	got, err := c.GetTask(up.WithAPIKey(ctx, aliceKey), &a2a.GetTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateInputRequired || len(got.History) != 1 {
		t.Fatalf("alice's task after bob's attempt: %+v %v; want it input-required, its history alice's message only", got, err)
	}
}

// TestContinuationEndedByAgentReplyIsCompletedV03: the same over A2A v0.3
// message/send (a2a-go v0.3 client): the answer on the task, ended by
// agent.Reply, is the Task completed, and tasks/get says completed.
func TestContinuationEndedByAgentReplyIsCompletedV03(t *testing.T) {
	ctx, c, asked := replierAskedV03(t)
	res, err := c.SendMessage(ctx, answerFor(asked.ID, asked.ContextID, "Paris"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetTask(ctx, &a2av03.TaskQueryParams{ID: asked.ID})
	if err != nil {
		t.Fatal(err)
	}
	done, ok := res.(*a2av03.Task)
	if !ok || done.Status.State != a2av03.TaskStateCompleted || got.Status.State != a2av03.TaskStateCompleted {
		st := a2av03.TaskState("")
		if ok {
			st = done.Status.State
		}
		t.Fatalf("answer ended by agent.Reply: message/send returned %T state %q, tasks/get state %q; want the Task completed in both (the agent's turn succeeded)", res, st, got.Status.State)
	}
}

// TestAgentReplyAnsweredTaskListedCompleted: a message the agent answers
// with agent.Reply (SendMessage's answer: the agent's Message) leaves a
// task record that ListTasks (A2A v1.0) shows; its turn is over and
// succeeded, so it is listed completed, never "working" forever (a client
// filtering ListTasks by state, or a dashboard of running tasks, would
// see it running).
func TestAgentReplyAnsweredTaskListedCompleted(t *testing.T) {
	p := replierPipeline(t)
	c := up.Client(t, p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.SendMessage(ctx, up.Msg("Lyon"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := res.(*a2a.Message); !ok {
		t.Fatalf("a new message answered with %T, want the agent's Message", res)
	}
	l, err := c.ListTasks(ctx, &a2a.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range l.Tasks {
		if tk.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("ListTasks shows task %s %s after the agent answered it with agent.Reply; want TASK_STATE_COMPLETED", tk.ID, tk.Status.State)
		}
	}
}

// TestV03ContinuationHistoryLength: A2A v0.3 message/send continuing
// a task with configuration.historyLength 1, blocking and not: the Task
// answered holds the last history message only (v0.3 §7.1
// MessageSendConfiguration.historyLength).
func TestV03ContinuationHistoryLength(t *testing.T) {
	p := askerPipeline(t)
	c := v03ClientAt(t, p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, blocking := range []bool{true, false} {
		asked := askedV03(t, ctx, c, "the weather")
		one := 1
		req := answerFor(asked.ID, asked.ContextID, "Paris")
		req.Config = &a2av03.MessageSendConfig{HistoryLength: &one, Blocking: &blocking}
		res, err := c.SendMessage(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		done, ok := res.(*a2av03.Task)
		if !ok || done.ID != asked.ID || len(done.History) != 1 {
			t.Fatalf("blocking=%v historyLength 1 continuation answered %T %+v; want the Task with one history message", blocking, res, res)
		}
	}
}

// TestV1ReturnImmediatelyContinuationHistoryLength: A2A v1.0 SendMessage with
// returnImmediately continuing a task, historyLength 1: the Task answered
// holds one history message, the answer just sent.
func TestV1ReturnImmediatelyContinuationHistoryLength(t *testing.T) {
	p := askerPipeline(t)
	c := up.Client(t, p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	task := up.Asked(t, ctx, c, up.Msg("the weather"))
	one := 1
	req := up.Reply(task, "Paris")
	req.Config = &a2a.SendMessageConfig{HistoryLength: &one, ReturnImmediately: true}
	res, err := c.SendMessage(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := res.(*a2a.Task)
	if !ok || got.ID != task.ID || len(got.History) != 1 || v1Text(got.History[0].Parts) != "Paris" {
		t.Fatalf("returnImmediately historyLength 1 answered %T %+v; want the Task with the answer \"Paris\" as its one history message", res, res)
	}
}

// TestStreamedContinuationEndedByAgentReply: the answer to an
// input-required task streamed (A2A v1.0 SendStreamingMessage, a2a-go/v2)
// and ended by agent.Reply is the task's stream: the Task first, then the
// final status-update, completed, carrying the agent's message (A2A v1.0
// §3.1.2: a stream is a Message alone only for a message that made no
// task; the client continuing a task follows the task). GetTask then
// agrees: completed.
func TestStreamedContinuationEndedByAgentReply(t *testing.T) {
	ctx, c, task := replierAsked(t)
	var evs []a2a.Event
	for ev, err := range c.SendStreamingMessage(ctx, up.Reply(task, "Paris")) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if len(evs) < 2 {
		t.Fatalf("streamed continuation ended by agent.Reply: %d events %+v; want the Task, then the completed status-update with the reply", len(evs), evs)
	}
	if first, ok := evs[0].(*a2a.Task); !ok || first.ID != task.ID {
		t.Fatalf("streamed continuation: first event %T %+v; want the Task %s", evs[0], evs[0], task.ID)
	}
	last, ok := evs[len(evs)-1].(*a2a.TaskStatusUpdateEvent)
	if !ok || last.TaskID != task.ID || last.Status.State != a2a.TaskStateCompleted || last.Status.Message == nil ||
		v1Text(last.Status.Message.Parts) != "Hello, Paris" {
		t.Fatalf("streamed continuation: last event %T %+v; want task %s's status-update completed with the message \"Hello, Paris\"", evs[len(evs)-1], evs[len(evs)-1], task.ID)
	}
	for _, ev := range evs {
		if _, bare := ev.(*a2a.Message); bare {
			t.Fatalf("streamed continuation: a bare Message event in the task's stream: %+v", evs)
		}
	}
}

// TestStreamedContinuationEndedByAgentReplyV03: the same over A2A v0.3
// message/stream (a2a-go v0.3 client): the stream follows the task and ends
// with its final status-update, completed, the agent's message in it.
func TestStreamedContinuationEndedByAgentReplyV03(t *testing.T) {
	ctx, c, asked := replierAskedV03(t)
	var evs []a2av03.Event
	for ev, err := range c.SendStreamingMessage(ctx, answerFor(asked.ID, asked.ContextID, "Paris")) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if len(evs) == 0 {
		t.Fatal("streamed v0.3 continuation: no event")
	}
	last, ok := evs[len(evs)-1].(*a2av03.TaskStatusUpdateEvent)
	if !ok || last.TaskID != asked.ID || !last.Final || last.Status.State != a2av03.TaskStateCompleted || last.Status.Message == nil {
		t.Fatalf("streamed v0.3 continuation: last event %T %+v; want task %s's final status-update, completed, with the agent's message", evs[len(evs)-1], evs[len(evs)-1], asked.ID)
	}
	if tp, ok := last.Status.Message.Parts[0].(a2av03.TextPart); !ok || tp.Text != "Hello, Paris" {
		t.Fatalf("streamed v0.3 continuation: final status message %+v; want \"Hello, Paris\"", last.Status.Message.Parts)
	}
	for _, ev := range evs {
		if _, bare := ev.(*a2av03.Message); bare {
			t.Fatalf("streamed v0.3 continuation: a bare Message event in the task's stream: %+v", evs)
		}
	}
}

// TestAgentVaultContinuationEndedByAgentReply: AgentVault's
// tasks/sendSubscribe answering a task's question (the task's id and a
// message: a turn of the task), ended by agent.Reply: the turn completes
// the task (tasks/get says COMPLETED), and the AgentVault stream, a
// task's stream by its profile (avStream: "the end a task_status
// COMPLETED, FAILED or CANCELED"), must end with task_status COMPLETED,
// as the same turn's v0.3 and v1.0 streams now end with the completed
// status-update: the reply as task_message, then task_status COMPLETED.
func TestAgentVaultContinuationEndedByAgentReply(t *testing.T) {
	pp := replierPipeline(t)
	p := &pipeline{url: pp.URL, nc: pp.NC, js: pp.JS, in: pp.Ingress}
	type status struct {
		TaskID  string  `json:"taskId"`
		State   string  `json:"state"`
		Message *string `json:"message"`
	}
	evs := readSSE(t, p.post(t, "/a2a", "text/event-stream", `{"jsonrpc":"2.0","id":"av-q","method":"tasks/sendSubscribe",`+
		`"params":{"message":{"role":"user","parts":[{"type":"text","content":"the weather"}]}}}`).Body)
	var q status
	if len(evs) == 0 || evs[len(evs)-1].event != "task_status" || json.Unmarshal(evs[len(evs)-1].data, &q) != nil || q.State != "INPUT_REQUIRED" {
		t.Fatalf("the question's stream: %+v; want it to end with task_status INPUT_REQUIRED", evs)
	}
	evs = readSSE(t, p.post(t, "/a2a", "text/event-stream", `{"jsonrpc":"2.0","id":"av-a","method":"tasks/sendSubscribe",`+
		`"params":{"id":"`+q.TaskID+`","message":{"role":"user","parts":[{"type":"text","content":"Paris"}]}}}`).Body)
	var got []string
	for _, e := range evs {
		got = append(got, e.event+" "+string(e.data))
	}
	var last status
	if len(evs) == 0 || evs[len(evs)-1].event != "task_status" || json.Unmarshal(evs[len(evs)-1].data, &last) != nil ||
		last.TaskID != q.TaskID || last.State != "COMPLETED" {
		t.Fatalf("AgentVault stream of task %s's answer, ended by agent.Reply:\n%s\nwant it to end with task_status COMPLETED",
			q.TaskID, strings.Join(got, "\n"))
	}
}

// TestOpenedTaskStreamEndedByAgentReply: a new task's
// SendStreamingMessage (a2a-go/v2) whose agent streams some text first
// (agent.Writer.Chunk) and then ends its turn with agent.Reply. The first
// frame is not the reply, so the stream opens as the task's: the Task,
// then the text's artifact-update. Once the Task is out the stream is the
// task's (A2A v1.0 §3.1.2: a Message alone only for a stream that is that
// one message), so the reply must end it as the final status-update,
// completed (never a bare Message in a task's stream); GetTask says
// completed.
func TestOpenedTaskStreamEndedByAgentReply(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("talker")))
	p.Pool("talker", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Chunk(e2a.DeltaText, "Let me look. "); err != nil {
			return err
		}
		return agent.Reply(w, "Sunny in Paris")
	}))
	c := up.Client(t, p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var evs []a2a.Event
	for ev, err := range c.SendStreamingMessage(ctx, up.Msg("the weather in Paris")) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	var got []string
	for _, ev := range evs {
		b, _ := json.Marshal(a2a.StreamResponse{Event: ev})
		got = append(got, string(b))
	}
	first, ok := evs[0].(*a2a.Task)
	if !ok {
		t.Fatalf("stream %s: want the Task first (the agent's first frame is not its reply)", strings.Join(got, "\n"))
	}
	last, ok := evs[len(evs)-1].(*a2a.TaskStatusUpdateEvent)
	if !ok || last.TaskID != first.ID || last.Status.State != a2a.TaskStateCompleted || last.Status.Message == nil ||
		v1Text(last.Status.Message.Parts) != "Sunny in Paris" {
		t.Errorf("task %s's stream:\n%s\nwant it to end with its completed status-update carrying the reply, not a bare Message",
			first.ID, strings.Join(got, "\n"))
	}
	if g, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: first.ID}); err != nil || g.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("GetTask %s: %+v %v; want completed", first.ID, g, err)
	}
}
