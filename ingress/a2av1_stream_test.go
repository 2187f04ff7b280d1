package ingress_test

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
)

// v1Stream collects the events of one of the SDK's streams, failing on an
// error.
func v1Stream(t *testing.T, what string, seq func(func(a2a.Event, error) bool)) []a2a.Event {
	t.Helper()
	var events []a2a.Event
	for ev, err := range seq {
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		events = append(events, ev)
	}
	if len(events) == 0 {
		t.Fatalf("%s: no event", what)
	}
	return events
}

// v1MessageIDs are the ids and roles of messages, in order.
func v1MessageIDs(ms []*a2a.Message) []string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, string(m.Role)+" "+m.ID)
	}
	return ids
}

// TestA2AV1StreamBeginsWithTask: A2A v1.0 §3.1.2 (Send Streaming
// Message): "Task lifecycle stream: If the agent returns a Task, the
// stream MUST begin with the Task object, followed by zero or more
// TaskStatusUpdateEvent or TaskArtifactUpdateEvent objects"; §11.7:
// "first a Task (or single Message)". On every binding: the Task of the
// later events, submitted, with the user's message in its history as
// GetTask shows it.
func TestA2AV1StreamBeginsWithTask(t *testing.T) {
	p, _ := startGRPCPipeline(t)
	eachV1Binding(t, p, 30*time.Second, func(ctx context.Context, t *testing.T, binding a2a.TransportProtocol, c *a2aclient.Client) {
		req := userMessage("stream")
		events := v1Stream(t, "SendStreamingMessage", c.SendStreamingMessage(ctx, req))
		if len(events) < 2 {
			t.Fatalf("%d events", len(events))
		}
		if _, ok := events[len(events)-1].(*a2a.Message); ok {
			t.Skip("a direct answer") // not the demo agent's
		}
		first, ok := events[0].(*a2a.Task)
		if !ok {
			t.Fatalf("first event of a task's stream over %s: %T %+v; want the Task (A2A v1.0 §3.1.2: the stream MUST begin with the Task object)",
				binding, events[0], events[0])
		}
		if first.Status.State != a2a.TaskStateSubmitted || first.Status.Timestamp == nil {
			t.Fatalf("the stream's Task: status %+v, want submitted with its time", first.Status)
		}
		for _, ev := range events[1:] {
			if _, ok := ev.(*a2a.Task); ok || ev.TaskInfo().TaskID != first.ID || ev.TaskInfo().ContextID != first.ContextID {
				t.Fatalf("a later event %T %+v: not an update of the Task %s/%s", ev, ev, first.ID, first.ContextID)
			}
		}
		if len(first.History) != 1 || first.History[0].ID != req.Message.ID || first.History[0].Role != a2a.MessageRoleUser ||
			v1Text(first.History[0].Parts) != "stream" {
			t.Fatalf("the stream's Task history %+v, want the user's message", first.History)
		}
		got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: first.ID})
		if err != nil {
			t.Fatal(err)
		}
		if m, g := first.History[0], got.History[0]; m.ID != g.ID || m.TaskID != g.TaskID || m.ContextID != g.ContextID ||
			v1Text(m.Parts) != v1Text(g.Parts) {
			t.Fatalf("the stream's user message %+v, GetTask's %+v", m, g)
		}
	})
}

// TestA2AV1StreamOfLaterTurnBeginsWithTask: on every binding, a turn
// that continues a task (the answer to its question) streams from the
// Task as GetTask shows it with that turn: the earlier turn's messages,
// then the answer; SubscribeToTask while such a turn runs begins with the
// task's current state (A2A v1.0 §3.1.6), both turns in its history.
func TestA2AV1StreamOfLaterTurnBeginsWithTask(t *testing.T) {
	p, _ := startGRPCPipeline(t)
	eachV1Binding(t, p, 60*time.Second, func(ctx context.Context, t *testing.T, binding a2a.TransportProtocol, c *a2aclient.Client) {
		asked := v1Stream(t, "the question", c.SendStreamingMessage(ctx, userMessage("ask:input the day "+string(binding))))
		task, ok := asked[0].(*a2a.Task)
		if !ok {
			t.Fatalf("first event %T", asked[0])
		}
		before, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		if err != nil || before.Status.State != a2a.TaskStateInputRequired {
			t.Fatalf("GetTask: %+v %v", before, err)
		}

		// The answer, streamed: its Task holds the earlier turn.
		answer := v1Answer(task, "Monday")
		events := v1Stream(t, "the answer", c.SendStreamingMessage(ctx, answer))
		first, ok := events[0].(*a2a.Task)
		if !ok || first.ID != task.ID || first.ContextID != task.ContextID || first.Status.State != a2a.TaskStateSubmitted {
			t.Fatalf("the answer's stream begins with %T %+v, want the Task %s submitted", events[0], events[0], task.ID)
		}
		after, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		if err != nil || after.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("GetTask after the answer: %+v %v", after, err)
		}
		got, want := v1MessageIDs(first.History), v1MessageIDs(after.History)
		if len(got) < 3 || len(got) > len(want) || got[len(got)-1] != "ROLE_USER "+answer.Message.ID {
			t.Fatalf("the answer's Task history %q, want GetTask's up to the answer %q", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("the answer's Task history %q, want GetTask's up to the answer %q", got, want)
			}
		}

		// Another task's question, and a slow answer: SubscribeToTask
		// while it runs begins with the task as it stands.
		asked = v1Stream(t, "the second question", c.SendStreamingMessage(ctx, userMessage("ask:input the hour "+string(binding))))
		task = asked[0].(*a2a.Task)
		slow := v1Answer(task, "noon")
		slow.Message.Metadata = map[string]any{"delay_ms": 100, "frames": 10}
		slow.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
		if _, err := c.SendMessage(ctx, slow); err != nil {
			t.Fatal(err)
		}
		subscribed := v1Stream(t, "SubscribeToTask", c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}))
		cur, ok := subscribed[0].(*a2a.Task)
		if !ok || cur.ID != task.ID || cur.Status.State.Terminal() {
			t.Fatalf("SubscribeToTask begins with %T %+v, want the running Task", subscribed[0], subscribed[0])
		}
		ids := v1MessageIDs(cur.History)
		if len(ids) < 3 || ids[0] != "ROLE_USER "+task.History[0].ID {
			t.Fatalf("SubscribeToTask's Task history %q, want every turn's", ids)
		}
		found := false
		for _, id := range ids {
			found = found || id == "ROLE_USER "+slow.Message.ID
		}
		if !found {
			t.Fatalf("SubscribeToTask's Task history %q lacks the running turn's message %s", ids, slow.Message.ID)
		}
		if end, ok := subscribed[len(subscribed)-1].(*a2a.TaskStatusUpdateEvent); !ok || end.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("SubscribeToTask ends with %T %+v", subscribed[len(subscribed)-1], subscribed[len(subscribed)-1])
		}
	})
}
