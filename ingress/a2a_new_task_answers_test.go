package ingress_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	a2av03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
)

// TestA2ABlockingSendNewTaskHistoryAsTasksGet: A2A v0.3 message/send
// (blocking) creating a task answers the Task; its history must be the
// task's as tasks/get shows it right after (the user's message first), as
// the continued-task and non-blocking answers already are
// (TestContinuationAnsweredWithTheTaskV03, TestV03NonBlockingAnswerIsTheTask;
// docs/protocols.md "the task, as GetTask then shows it"). The new task's
// answer left the user's message out of history: a client asking for
// historyLength 1 got nothing where tasks/get gives one message.
func TestA2ABlockingSendNewTaskHistoryAsTasksGet(t *testing.T) {
	p := askerPipeline(t)
	c := v03ClientAt(t, p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	asked := askedV03(t, ctx, c, "the weather")
	got, err := c.GetTask(ctx, &a2av03.TaskQueryParams{ID: asked.ID})
	if err != nil {
		t.Fatal(err)
	}
	if h := v03History(asked.History); h != v03History(got.History) || !strings.Contains(h, "user: the weather") {
		t.Errorf("message/send's Task history [%s], want the task's as tasks/get shows it [%s]", h, v03History(got.History))
	}
	one := 1
	res, err := c.SendMessage(ctx, &a2av03.MessageSendParams{
		Message: a2av03.NewMessage(a2av03.MessageRoleUser, a2av03.TextPart{Text: "the weather"}),
		Config:  &a2av03.MessageSendConfig{HistoryLength: &one}})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2av03.Task)
	if !ok {
		t.Fatalf("result %T", res)
	}
	if len(task.History) != 1 {
		t.Fatalf("message/send historyLength 1 answered %d history messages [%s], want 1", len(task.History), v03History(task.History))
	}
}

// TestA2AResubscribeAgentVaultTaskContextID: tasks/resubscribe (A2A
// v0.3) of the caller's task made with AgentVault's tasks/send is served
// in A2A's shape; every event of the stream must name the task's context
// (contextId is a required, non-empty id of a v0.3 status-update), and the
// same one throughout. The opening status-update had "contextId":"" while
// the later events named the task id as the context.
func TestA2AResubscribeAgentVaultTaskContextID(t *testing.T) {
	p := startPipeline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := p.post(t, "/a2a", "", `{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"message":{"role":"user","parts":[{"type":"text","content":"hi av"}]}}}`)
	var sent struct{ Result struct{ ID string } }
	if err := jsonDecode(resp, &sent); err != nil || sent.Result.ID == "" {
		t.Fatalf("tasks/send: %+v %v", sent, err)
	}
	_, c := a2aClient(t, p)
	var events []a2av03.Event
	for ev, err := range c.ResubscribeToTask(ctx, &a2av03.TaskIDParams{ID: a2av03.TaskID(sent.Result.ID)}) {
		if err != nil {
			t.Fatalf("tasks/resubscribe: %v", err)
		}
		events = append(events, ev)
	}
	if len(events) == 0 {
		t.Fatal("no events")
	}
	ctxIDs := map[string]bool{}
	for i, ev := range events {
		var id string
		switch e := ev.(type) {
		case *a2av03.TaskStatusUpdateEvent:
			id = e.ContextID
		case *a2av03.TaskArtifactUpdateEvent:
			id = e.ContextID
		case *a2av03.Task:
			id = e.ContextID
		case *a2av03.Message:
			id = e.ContextID
		}
		if id == "" {
			b, _ := json.Marshal(ev)
			t.Errorf("event %d has no contextId: %s", i, b)
		}
		ctxIDs[id] = true
	}
	if len(ctxIDs) != 1 {
		t.Fatalf("one stream names %d contexts: %v", len(ctxIDs), ctxIDs)
	}
}

// TestA2AFinishedTaskNotReopenedByAgentVault: a finished A2A task
// accepts no more messages (-32004, "in both generations: a task in a
// terminal state accepts no more messages", docs/protocols.md; A2A v0.3
// §7.1). The same endpoint's AgentVault tasks/send naming that A2A task
// (the caller's own) was accepted and ran a new turn: the A2A client's
// completed task changed afterwards (tasks/get showed the new turn), which
// message/send itself refuses. It is refused the same way now.
func TestA2AFinishedTaskNotReopenedByAgentVault(t *testing.T) {
	p := startPipeline(t)
	_, c := a2aClient(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	task := sentV03(t, ctx, c, "first")
	// The A2A door refuses another message to it.
	again := a2av03.NewMessage(a2av03.MessageRoleUser, a2av03.TextPart{Text: "again"})
	again.TaskID, again.ContextID = task.ID, task.ContextID
	if _, err := c.SendMessage(ctx, &a2av03.MessageSendParams{Message: again}); !errors.Is(err, a2av03.ErrUnsupportedOperation) {
		t.Fatalf("message/send to the finished task: %v, want UnsupportedOperation", err)
	}
	// AgentVault's tasks/send on the same endpoint must not reopen it.
	resp := p.post(t, "/a2a", "", `{"jsonrpc":"2.0","id":"av","method":"tasks/send","params":{"id":"`+string(task.ID)+
		`","message":{"role":"user","parts":[{"type":"text","content":"again"}]}}}`)
	var out struct {
		Result json.RawMessage
		Error  *struct{ Code int }
	}
	if err := jsonDecode(resp, &out); err != nil {
		t.Fatal(err)
	}
	if out.Error == nil {
		t.Errorf("tasks/send naming finished A2A task %s accepted (%s); want an error (-32004)", task.ID, out.Result)
	}
	got, err := c.GetTask(ctx, &a2av03.TaskQueryParams{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if h := v03History(got.History); strings.Contains(h, "user: again") {
		t.Fatalf("the finished A2A task took another turn: history [%s]", h)
	}
}

// TestV1BlockingSendNewTaskHistoryAsGetTask: the A2A v1.0 twin of
// TestA2ABlockingSendNewTaskHistoryAsTasksGet: SendMessage (blocking)
// creating a task that asks for input answers the Task with the user's
// message in its history, as GetTask shows it; it held the agent's
// question only.
func TestV1BlockingSendNewTaskHistoryAsGetTask(t *testing.T) {
	p := askerPipeline(t)
	c := up.Client(t, p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	asked := up.Asked(t, ctx, c, up.Msg("the weather"))
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: asked.ID})
	if err != nil {
		t.Fatal(err)
	}
	if h := v1HistoryText(asked); h != v1HistoryText(got) || !strings.Contains(h, "the weather") {
		t.Errorf("SendMessage's Task history [%s], want the task's as GetTask shows it [%s]", h, v1HistoryText(got))
	}
}
