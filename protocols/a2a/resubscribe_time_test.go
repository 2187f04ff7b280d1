package a2a_test

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestResubscribeTimesInOrder: the status-updates of a v0.3
// tasks/resubscribe of a finished task, as a2a-go v0.3's client reads
// them, carry times that never go back. The stream opened with a working
// status-update stamped when the client resubscribed, before the replayed
// frames' events with their stored times (the final completed one, earlier
// than the opening working). It now carries the task's stored time: its
// first frame's.
func TestResubscribeTimesInOrder(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("echo")))
	p.Pool("echo", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Chunk(e2a.DeltaText, "echo"); err != nil {
			return err
		}
		return w.Complete(map[string]any{"content": "echo"})
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := a2aclient.NewFromEndpoints(ctx, []a2a.AgentInterface{{URL: p.URL + "/a2a", Transport: a2a.TransportProtocolJSONRPC}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	var task a2a.TaskID
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hi"})}) {
		if err != nil {
			t.Fatalf("message/stream: %v", err)
		}
		task = ev.TaskInfo().TaskID
	}
	if task == "" {
		t.Fatal("message/stream: no task")
	}
	type status struct {
		state a2a.TaskState
		at    time.Time
	}
	var got []status
	for ev, err := range c.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: task}) {
		if err != nil {
			t.Fatalf("tasks/resubscribe: %v", err)
		}
		if su, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
			if su.Status.Timestamp == nil {
				t.Fatalf("tasks/resubscribe: status-update %s without a timestamp", su.Status.State)
			}
			got = append(got, status{su.Status.State, *su.Status.Timestamp})
		}
	}
	if len(got) < 2 || got[0].state != a2a.TaskStateWorking || got[len(got)-1].state != a2a.TaskStateCompleted {
		t.Fatalf("tasks/resubscribe: status-updates %v; want working first, completed last", got)
	}
	for i := 1; i < len(got); i++ {
		if got[i].at.Before(got[i-1].at) {
			t.Errorf("tasks/resubscribe: %s at %s after %s at %s: the stream's times go back",
				got[i].state, got[i].at.Format(time.RFC3339Nano), got[i-1].state, got[i-1].at.Format(time.RFC3339Nano))
		}
	}
}
