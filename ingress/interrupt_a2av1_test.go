package ingress_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// v1Interrupted checks an A2A v1.0 task interrupted in state with the
// agent's question want as its status message.
func v1Interrupted(t *testing.T, what string, task *a2a.Task, state a2a.TaskState, want string) {
	t.Helper()
	if task == nil || task.Status.State != state || task.Status.Message == nil {
		t.Fatalf("%s: task %+v, want %s with a message", what, task, state)
	}
	m := task.Status.Message
	if got := v1Text(m.Parts); got != want || m.Role != a2a.MessageRoleAgent || m.ID == "" {
		t.Fatalf("%s: status message %+v (text %q), want the agent's %q", what, m, got, want)
	}
}

// v1Answer is the user's answer to a question of the task.
func v1Answer(task a2a.TaskInfoProvider, text string) *a2a.SendMessageRequest {
	return &a2a.SendMessageRequest{Message: a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart(text))}
}

// TestInterruptA2AV1: with the a2a-go/v2 client over each binding
// (JSON-RPC, HTTP+JSON, gRPC), a streamed turn that asks for input ends
// with the status TASK_STATE_INPUT_REQUIRED carrying the agent's question;
// GetTask, ListTasks and SubscribeToTask show it; the answer (SendMessage
// with the task's id) is a new turn of the same task and context that
// completes, which the subscription follows to that end (STREAM-SUB-002),
// and GetTask then holds both turns. A turn
// asking for auth by SendMessage answers the task TASK_STATE_AUTH_REQUIRED
// and a streamed answer completes it.
func TestInterruptA2AV1(t *testing.T) {
	p, _ := startGRPCPipeline(t)
	eachV1Binding(t, p, 60*time.Second, func(ctx context.Context, t *testing.T, binding a2a.TransportProtocol, c *a2aclient.Client) {
		topic := "the weather " + string(binding)
		q := demo.Question(e2a.StateInputRequired, topic)

		var last a2a.Event
		for ev, err := range c.SendStreamingMessage(ctx, userMessage("ask:input "+topic)) {
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			last = ev
		}
		su, ok := last.(*a2a.TaskStatusUpdateEvent)
		if !ok {
			t.Fatalf("last event %T %+v", last, last)
		}
		v1Interrupted(t, "the stream's last status", &a2a.Task{Status: su.Status}, a2a.TaskStateInputRequired, q)
		task, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: su.TaskID})
		if err != nil {
			t.Fatal(err)
		}
		v1Interrupted(t, "GetTask", task, a2a.TaskStateInputRequired, q)
		if task.ContextID != su.ContextID {
			t.Fatalf("GetTask context %q, the stream's %q", task.ContextID, su.ContextID)
		}
		list, err := c.ListTasks(ctx, &a2a.ListTasksRequest{Status: a2a.TaskStateInputRequired, ContextID: su.ContextID})
		if err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != su.TaskID {
			t.Fatalf("ListTasks input-required: %+v %v", list, err)
		}
		v1Interrupted(t, "ListTasks", list.Tasks[0], a2a.TaskStateInputRequired, q)

		// SubscribeToTask answers the task as it stands; the answer
		// starts the next turn, which the subscription follows to the
		// terminal state (the task was not terminal).
		var subscribed []a2a.Event
		var res a2a.SendMessageResult
		for ev, err := range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: su.TaskID}) {
			if err != nil {
				t.Fatalf("subscribe: %v", err)
			}
			subscribed = append(subscribed, ev)
			if len(subscribed) == 1 {
				if res, err = c.SendMessage(ctx, v1Answer(task, "Paris")); err != nil {
					t.Fatalf("the answer: %v", err)
				}
			}
		}
		st, _ := subscribed[0].(*a2a.Task)
		v1Interrupted(t, "SubscribeToTask", st, a2a.TaskStateInputRequired, q)
		if end, ok := subscribed[len(subscribed)-1].(*a2a.TaskStatusUpdateEvent); !ok || end.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("SubscribeToTask's last event %T %+v, want the answer's completed status", subscribed[len(subscribed)-1], subscribed[len(subscribed)-1])
		}
		done, ok := res.(*a2a.Task)
		if !ok || done.ID != su.TaskID || done.ContextID != su.ContextID || done.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("the answer's result %T %+v", res, res)
		}
		task, err = c.GetTask(ctx, &a2a.GetTaskRequest{ID: su.TaskID})
		if err != nil || task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("GetTask after the answer: %+v %v", task, err)
		}
		var history []string
		for _, m := range task.History {
			if s := v1Text(m.Parts); s != "" {
				history = append(history, string(m.Role)+": "+s)
			}
		}
		var reply string
		for _, a := range task.Artifacts {
			reply += v1Text(a.Parts)
		}
		want := []string{"ROLE_USER: ask:input " + topic, "ROLE_AGENT: I need more from you first.", "ROLE_AGENT: " + q, "ROLE_USER: Paris"}
		if strings.Join(history, "\n") != strings.Join(want, "\n") || reply != "You said: Paris" {
			t.Fatalf("history\n%s\nwant\n%s\nreply %q", strings.Join(history, "\n"), strings.Join(want, "\n"), reply)
		}
		checkTurnEnvelopes(t, p, string(su.TaskID), su.ContextID, 2)

		// auth-required by SendMessage, answered by a stream.
		aq := demo.Question(e2a.StateAuthRequired, topic)
		res, err = c.SendMessage(ctx, userMessage("ask:auth "+topic))
		if err != nil {
			t.Fatal(err)
		}
		at, _ := res.(*a2a.Task)
		v1Interrupted(t, "SendMessage asking for auth", at, a2a.TaskStateAuthRequired, aq)
		last = nil
		for ev, err := range c.SendStreamingMessage(ctx, v1Answer(at, "approved")) {
			if err != nil {
				t.Fatalf("streamed answer: %v", err)
			}
			last = ev
		}
		if su, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || su.Status.State != a2a.TaskStateCompleted || su.TaskID != at.ID || su.ContextID != at.ContextID {
			t.Fatalf("the streamed answer ends %T %+v", last, last)
		}
	})
}
