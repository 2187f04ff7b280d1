package ingress_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// The reads of A2A v1.0 tasks: ListTasks' order and filters, the
// historyLength check on every binding, GetTask's history.

// ptrTo is a pointer to v.
func ptrTo[T any](v T) *T { return &v }

// TestA2AV1ListTasksStatusTimestampAfterInclusive: a2a.proto v1.0
// ListTasksRequest.status_timestamp_after: "Only tasks with a status
// timestamp time greater than or equal to this value will be returned."
// A client that passes the status timestamp of a task it read must get
// that task back.
func TestA2AV1ListTasksStatusTimestampAfterInclusive(t *testing.T) {
	p, _ := startGRPCPipeline(t)
	for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolGRPC} {
		t.Run(string(binding), func(t *testing.T) {
			_, c := v1Client(t, p, binding)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := c.SendMessage(ctx, userMessage("stamp me"))
			if err != nil {
				t.Fatal(err)
			}
			task, ok := res.(*a2a.Task)
			if !ok {
				t.Fatalf("SendMessage answered %T", res)
			}
			got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
			if err != nil || got.Status.Timestamp == nil {
				t.Fatalf("GetTask: %+v %v", got, err)
			}
			list, err := c.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: task.ContextID, StatusTimestampAfter: ptrTo(*got.Status.Timestamp)})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Tasks) != 1 || list.Tasks[0].ID != task.ID || list.TotalSize != 1 {
				t.Fatalf("ListTasks statusTimestampAfter=%s (the task's own status timestamp): %d tasks, total %d; "+
					"want the task: status_timestamp_after keeps tasks whose status timestamp is >= the value (a2a.proto ListTasksRequest)",
					got.Status.Timestamp.Format(time.RFC3339Nano), len(list.Tasks), list.TotalSize)
			}
		})
	}
}

// TestA2AV1ListTasksSortedByStatusTimestamp: A2A v1.0 §3.1.4:
// "Implementations MUST return tasks sorted by their status timestamp time
// in descending order (most recently updated tasks first)". Task A is
// sent first and completes last, task B is sent second and completes
// first: A's status is the newer, so A is listed first.
func TestA2AV1ListTasksSortedByStatusTimestamp(t *testing.T) {
	p := startPipeline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, taskA, release := gatedTask(ctx, t, p, "A: sent first, finishes last")
	// B is answered once it has completed (a blocking send), while A waits.
	if _, err := c.SendMessage(ctx, userMessage("B: sent second, finishes first")); err != nil {
		t.Fatal(err)
	}
	close(release)
	testkit.Eventually(t, 10*time.Second, "task A completed", func() bool {
		g, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: taskA.ID})
		return err == nil && g.Status.State == a2a.TaskStateCompleted
	})
	list, err := c.ListTasks(ctx, &a2a.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tasks) != 2 {
		t.Fatalf("ListTasks: %d tasks, want A and B", len(list.Tasks))
	}
	first, second := list.Tasks[0], list.Tasks[1]
	if first.Status.Timestamp == nil || second.Status.Timestamp == nil {
		t.Fatalf("tasks without a status timestamp: %+v %+v", first.Status, second.Status)
	}
	if first.Status.Timestamp.Before(*second.Status.Timestamp) || first.ID != taskA.ID {
		t.Fatalf("ListTasks order: %s (status %s) then %s (status %s); want A %s first: "+
			"tasks MUST be sorted by their status timestamp, most recent first (A2A v1.0 §3.1.4)",
			first.ID, first.Status.Timestamp.Format(time.RFC3339Nano), second.ID, second.Status.Timestamp.Format(time.RFC3339Nano), taskA.ID)
	}
}

// TestA2AV1NegativeHistoryLength: a negative historyLength is
// InvalidParams on JSON-RPC and HTTP+JSON (the handler's check; the spec's
// REST example of historyLength=-5 is an error); over gRPC the same
// GetTask and ListTasks must not answer the whole history as if no limit
// had been given (nor publish a SendMessage whose configuration has one).
func TestA2AV1NegativeHistoryLength(t *testing.T) {
	p, _ := startGRPCPipeline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC} {
		t.Run(string(binding), func(t *testing.T) {
			_, c := v1Client(t, p, binding)
			res, err := c.SendMessage(ctx, userMessage("history"))
			if err != nil {
				t.Fatal(err)
			}
			task := res.(*a2a.Task)
			g, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID, HistoryLength: ptrTo(-1)})
			if !errors.Is(err, a2a.ErrInvalidParams) {
				n := -1
				if g != nil {
					n = len(g.History)
				}
				t.Errorf("GetTask historyLength -1 over %s: %d history messages, err %v; want InvalidParams, as the other bindings answer", binding, n, err)
			}
			if _, err := c.ListTasks(ctx, &a2a.ListTasksRequest{HistoryLength: ptrTo(-1)}); !errors.Is(err, a2a.ErrInvalidParams) {
				t.Errorf("ListTasks historyLength -1 over %s: err %v; want InvalidParams, as the other bindings answer", binding, err)
			}
			neg := userMessage("negative history")
			neg.Config = &a2a.SendMessageConfig{HistoryLength: ptrTo(-1)}
			if _, err := c.SendMessage(ctx, neg); !errors.Is(err, a2a.ErrInvalidParams) {
				t.Errorf("SendMessage configuration.historyLength -1 over %s: err %v; want InvalidParams, as the other bindings answer", binding, err)
			}
		})
	}
}

// TestA2AV1RESTListTasksLastUpdatedAfter: the a2a-go/v2 client
// (v2.4.0, the SDK in go.mod) over HTTP+JSON sends the filter as the query
// parameter lastUpdatedAfter, which the binding takes as
// statusTimestampAfter (the SDK's handler reads only that): a filter in
// the future lists nothing.
func TestA2AV1RESTListTasksLastUpdatedAfter(t *testing.T) {
	p := startPipeline(t)
	_, c := v1Client(t, p, a2a.TransportProtocolHTTPJSON)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.SendMessage(ctx, userMessage("old task")); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	list, err := c.ListTasks(ctx, &a2a.ListTasksRequest{StatusTimestampAfter: &future})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tasks) != 0 || list.TotalSize != 0 {
		t.Fatalf("ListTasks over HTTP+JSON with statusTimestampAfter an hour ahead: %d tasks (total %d); want none: "+
			"the a2a-go/v2 client's filter (query lastUpdatedAfter) is ignored", len(list.Tasks), list.TotalSize)
	}
}

// TestA2AV1HistoryKeepsReferenceTaskIDs: the user's message in the
// task's history is the message the client sent: its referenceTaskIds
// (a2a.proto Message.reference_task_ids) are kept.
func TestA2AV1HistoryKeepsReferenceTaskIDs(t *testing.T) {
	p := startPipeline(t)
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.SendMessage(ctx, userMessage("first"))
	if err != nil {
		t.Fatal(err)
	}
	ref := res.(*a2a.Task).ID
	req := userMessage("about the first")
	req.Message.ReferenceTasks = []a2a.TaskID{ref}
	res, err = c.SendMessage(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: res.(*a2a.Task).ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range got.History {
		if m.ID == req.Message.ID {
			if len(m.ReferenceTasks) != 1 || m.ReferenceTasks[0] != ref {
				t.Fatalf("history's user message %s: referenceTaskIds %v; want [%s] as sent", m.ID, m.ReferenceTasks, ref)
			}
			return
		}
	}
	t.Fatalf("history has no message %s", req.Message.ID)
}

// gatedTask serves the pool "gated" on p, whose first request waits until
// release is closed (the others complete at once), and sends it text with
// returnImmediately: it returns the client of the pool's A2A v1.0
// JSON-RPC interface and that first task, running.
func gatedTask(ctx context.Context, t *testing.T, p *pipeline, text string) (c *a2aclient.Client, taskA *a2a.Task, release chan struct{}) {
	t.Helper()
	var err error
	started := make(chan struct{}, 1)
	release = make(chan struct{})
	var n atomic.Int32
	actx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = agent.Run(actx, p.nc, "gated", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
			if n.Add(1) == 1 { // the first request waits for release
				started <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return w.Complete(map[string]any{"content": "done"})
		}), agent.WithConcurrency(4))
	}()
	t.Cleanup(func() { stop(); <-done })

	c, err = a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{
		a2a.NewAgentInterface(p.url+ingress.A2AV1Path+"?agent=gated", a2a.TransportProtocolJSONRPC)})
	if err != nil {
		t.Fatal(err)
	}
	reqA := userMessage(text)
	reqA.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	resA, err := c.SendMessage(ctx, reqA)
	if err != nil {
		t.Fatal(err)
	}
	taskA = resA.(*a2a.Task)
	testkit.Receive(t, started, 10*time.Second, "the agent never got task A")
	return c, taskA, release
}
