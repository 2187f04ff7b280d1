package ingress_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestA2AV1ListTasksEndsWhileTasksWork: a client pages through
// ListTasks (pageSize 1) while two of its tasks are working and report
// progress between its page calls (a streaming agent does, many times a
// second). A listing of two tasks must end: each task may be listed again
// after it changed (cursor.go accepts that), but the pager must not get a
// next page for ever. With "changed since the listing started, oldest
// change first", each page listed whichever of the two changed least
// recently and always had the other as a next page (found by review);
// the tasks changed since are by id (cursor.go).
func TestA2AV1ListTasksEndsWhileTasksWork(t *testing.T) {
	p := startPipeline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	var ticks []chan struct{}
	started, quit := make(chan struct{}, 2), make(chan struct{})
	actx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = agent.Run(actx, p.nc, "busy", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
			tick := make(chan struct{}, 1)
			mu.Lock()
			ticks = append(ticks, tick)
			mu.Unlock()
			started <- struct{}{}
			for {
				select {
				case <-tick:
					if err := w.Write("e2a.chunk", "in_progress", map[string]any{"delta_kind": "text", "delta": "step "}, false); err != nil {
						return err
					}
				case <-quit:
					return w.Complete(map[string]any{"content": "done"})
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}), agent.WithConcurrency(4))
	}()
	t.Cleanup(func() { close(quit); stop(); <-done })

	c, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{
		a2a.NewAgentInterface(p.url+ingress.A2AV1Path+"?agent=busy", a2a.TransportProtocolJSONRPC)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []a2a.TaskID
	for _, text := range []string{"X: works a while", "Y: works a while"} {
		req := userMessage(text)
		req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
		res, err := c.SendMessage(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.(*a2a.Task).ID)
		testkit.Receive(t, started, 10*time.Second, "the agent never got the task")
	}
	stamp := func(id a2a.TaskID) time.Time {
		g, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
		if err != nil || g.Status.Timestamp == nil {
			return time.Time{}
		}
		return *g.Status.Timestamp
	}
	// progress: both tasks report a step, and the client waits until their
	// status timestamps moved.
	progress := func() {
		before := []time.Time{stamp(ids[0]), stamp(ids[1])}
		mu.Lock()
		for _, tk := range ticks {
			tk <- struct{}{}
		}
		mu.Unlock()
		testkit.Eventually(t, 10*time.Second, "both tasks' status timestamps moved", func() bool {
			return stamp(ids[0]).After(before[0]) && stamp(ids[1]).After(before[1])
		})
	}
	progress()

	var seen []a2a.TaskID
	tok := ""
	for pages := 0; ; pages++ {
		page, err := c.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 1, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range page.Tasks {
			seen = append(seen, tk.ID)
		}
		if page.NextPageToken == "" {
			break
		}
		if pages >= 6 {
			t.Fatalf("a ListTasks listing of %d tasks (totalSize %d) still has a next page after %d pages (pages listed %v): "+
				"a listing must end, listing a task that changed again at most once more, not for as long as its tasks work "+
				"(a client paging to the end never returns)", len(ids), page.TotalSize, pages+1, seen)
		}
		tok = page.NextPageToken
		progress()
	}
}

// TestA2AV1ListTasksOrderWithAgentClockAhead: A2A v1.0 ListTasks
// lists tasks by status timestamp, most recent first (a2a spec §3.1.4;
// cursor.go: "a listing whose tasks do not change while it is paged is in
// exactly that order"). The timestamp is the agent's own (a bridged
// upstream's status-update keeps its timestamp), and an agent's clock may
// run ahead of the ingress' (another host). Taking the listing's start
// from the ingress' clock alone put such tasks behind all the others, as
// "changed since": a one-page listing that no one changed was out of the
// spec's order (found by review). The start is the newest status then.
func TestA2AV1ListTasksOrderWithAgentClockAhead(t *testing.T) {
	p := startPipeline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ahead := time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339Nano)
	actx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = agent.Run(actx, p.nc, "ahead", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
			return w.Write(e2a.KindA2AStreamEvent, e2a.StatusSucceeded, e2a.StreamEventBody{Branch: e2a.BranchStatusUpdate,
				Payload: map[string]any{"final": true, "status": map[string]any{"state": "completed", "timestamp": ahead,
					"message": map[string]any{"messageId": "m1", "role": "agent", "parts": []any{map[string]any{"kind": "text", "text": "done"}}}}}}, true)
		}))
	}()
	t.Cleanup(func() { stop(); <-done })
	c, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{
		a2a.NewAgentInterface(p.url+ingress.A2AV1Path+"?agent=ahead", a2a.TransportProtocolJSONRPC)})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"one", "two"} {
		if _, err := c.SendMessage(ctx, userMessage(text)); err != nil {
			t.Fatal(err)
		}
	}
	// A third task of another agent, finished now by the ingress' clock.
	d, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{
		a2a.NewAgentInterface(p.url+ingress.A2AV1Path+"?agent=demo", a2a.TransportProtocolJSONRPC)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("three")),
		Config: &a2a.SendMessageConfig{ReturnImmediately: false}}); err != nil {
		t.Fatal(err)
	}
	// Listed on the pipeline's own interface: a pool's lists its own tasks.
	all, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{
		a2a.NewAgentInterface(p.url+ingress.A2AV1Path, a2a.TransportProtocolJSONRPC)})
	if err != nil {
		t.Fatal(err)
	}
	var list *a2a.ListTasksResponse
	testkit.Eventually(t, 10*time.Second, "three tasks listed", func() bool {
		list, err = all.ListTasks(ctx, &a2a.ListTasksRequest{})
		return err == nil && len(list.Tasks) == 3
	})
	var stamps []string
	for _, tk := range list.Tasks {
		if tk.Status.Timestamp == nil {
			t.Fatalf("task %s has no status timestamp", tk.ID)
		}
		stamps = append(stamps, tk.Status.Timestamp.UTC().Format(time.RFC3339Nano))
	}
	for i := 1; i < len(list.Tasks); i++ {
		if list.Tasks[i].Status.Timestamp.After(*list.Tasks[i-1].Status.Timestamp) {
			t.Fatalf("ListTasks (one page, nothing changing) must list tasks by status timestamp, most recent first "+
				"(a2a §3.1.4); got timestamps %v: tasks whose agent's clock runs ahead of the ingress' are listed last", stamps)
		}
	}
}
