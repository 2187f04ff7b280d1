package ingress_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestA2ANonBlockingSendThenCancel: with configuration.blocking false
// (a2a-go's Polling) message/send answers at once with the submitted task
// although the demo agent, paced from the message metadata, would take
// minutes; tasks/cancel then cancels it and tasks/get sees it canceled.
func TestA2ANonBlockingSendThenCancel(t *testing.T) {
	p := startPipeline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	card, err := agentcard.NewResolver(nil).Resolve(ctx, p.url)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithConfig(a2aclient.Config{Polling: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Destroy() }()

	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "slow please"})
	msg.Metadata = map[string]any{"delay_ms": 60000}
	res, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: msg})
	if err != nil {
		t.Fatalf("message/send: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("result %T", res)
	}
	if task.Status.State != a2a.TaskStateSubmitted && task.Status.State != a2a.TaskStateWorking {
		t.Fatalf("non-blocking send answered state %s", task.Status.State)
	}
	if task.ID == "" || task.ContextID == "" || len(task.History) == 0 || textOf(task.History[0].Parts) != "slow please" {
		t.Fatalf("task %+v", task)
	}
	// The agent has started (a frame is out) before the cancel.
	testkit.Eventually(t, 10*time.Second, "the task working", func() bool {
		got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
		return err == nil && got.Status.State == a2a.TaskStateWorking
	})
	canceled, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID})
	if err != nil {
		t.Fatalf("tasks/cancel: %v", err)
	}
	if canceled.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel answered %s", canceled.Status.State)
	}
	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("tasks/get after cancel: %+v %v", got, err)
	}
}

// TestA2AContinuedTaskKeepsContext: message/send with the taskId of a
// running task and no contextId stays in the task's context (sent
// non-blocking: the turn runs once the held one ends).
func TestA2AContinuedTaskKeepsContext(t *testing.T) {
	p := startPipeline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, first, _ := gatedTurn(ctx, t, p, "one")
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "two"})
	msg.TaskID = first.ID
	nonBlocking := false
	res, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: msg, Config: &a2a.MessageSendConfig{Blocking: &nonBlocking}})
	if err != nil {
		t.Fatal(err)
	}
	second := res.(*a2a.Task)
	if second.ID != first.ID || second.ContextID != first.ContextID {
		t.Fatalf("continued task %s/%s, want %s/%s", second.ID, second.ContextID, first.ID, first.ContextID)
	}
	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: first.ID})
	if err != nil || got.ContextID != first.ContextID {
		t.Fatalf("tasks/get %+v %v", got, err)
	}
	for _, m := range got.History {
		if m.ContextID != first.ContextID {
			t.Fatalf("history message in context %s, want %s", m.ContextID, first.ContextID)
		}
	}
}

// TestA2ATerminalTaskRefused: a message naming a task whose turn has
// finished is UnsupportedOperation (-32004), as both specifications say;
// the same text with the task's contextId and no taskId starts a
// new task in that context (the trpc interaction spec's multi-turn form).
func TestA2ATerminalTaskRefused(t *testing.T) {
	p := startPipeline(t)
	_, c := a2aClient(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "one"})})
	if err != nil {
		t.Fatal(err)
	}
	first := res.(*a2a.Task)
	if first.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("first turn %s", first.Status.State)
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "two"})
	msg.TaskID, msg.ContextID = first.ID, first.ContextID
	_, err = c.SendMessage(ctx, &a2a.MessageSendParams{Message: msg})
	if !errors.Is(err, a2a.ErrUnsupportedOperation) || !strings.Contains(err.Error(), "has finished") {
		t.Fatalf("message to a completed task: %v", err)
	}
	msg = a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "two"})
	msg.ContextID = first.ContextID
	res, err = c.SendMessage(ctx, &a2a.MessageSendParams{Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	if next := res.(*a2a.Task); next.ID == first.ID || next.ContextID != first.ContextID || next.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("next task %s in %s (%s), first %s in %s", next.ID, next.ContextID, next.Status.State, first.ID, first.ContextID)
	}
	// The refused message changed nothing: the task still has one turn.
	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: first.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range got.History {
		if textOf(m.Parts) == "two" {
			t.Fatalf("the refused message is in the task's history: %+v", got.History)
		}
	}
}
