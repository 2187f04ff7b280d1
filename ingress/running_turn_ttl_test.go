package ingress_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestRunningTurnKeepsItsTask: a task's record in E2A_TASKS expires
// E2A_TASKS_TTL after its last write, and only a turn's append wrote it:
// a turn running longer (an agent waiting hours on a model or a human; a
// TTL of 4 s here) lost its task while it ran. Its owner was then told
// the task does not exist (GetTask, ListTasks, CancelTask, the next
// message) once its first request had aged out of E2A_REQUESTS, and
// before that read it as of its first turn: input-required, the running
// turn unseen, a CancelTask answered canceled that stopped nothing and
// a next message run beside the running turn. The replica that published
// the turn now writes the record again while the turn runs, so that it is
// never older than the TTL: the test follows the record's writes for
// twice the TTL past the append, each within the TTL of the one before,
// and the owner still reads the task running (submitted: A1 wrote no
// frame), lists it, queues a next
// message after the running turn and cancels it; the replica then keeps
// the ended turns no more. The task's push config, made before A1, is
// kept with its record (A1 writes no frame, at which the push stage would
// write it again): listed after twice the TTL.
func TestRunningTurnKeepsItsTask(t *testing.T) {
	const ttl = 4 * time.Second
	cfg := natstest.Config()
	cfg.TasksTTL = ttl
	_, nc := natstest.RunServer(t, natstest.WithConfig(cfg))
	makePushBucket(t, nc, cfg)
	pp, g, c, ctx, task := gatedInputTask(t, pipetest.WithConn(nc), pipetest.WithPush("127.0.0.1"))
	// A push config made before A1, whose turn writes no frame: the push
	// stage does not write it again.
	r := pushtest.NewReceiver(t)
	if _, err := c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "v1", URL: r.URL + "/v1"}); err != nil {
		t.Fatalf("CreateTaskPushConfig: %v", err)
	}
	kv, err := pp.JS.KeyValue(ctx, streams.TasksBucket)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := subjects.EncodeID(string(task.ID))
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(ctx, "task."+tok, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	a1 := sendAnswer(ctx, c, task, "A1", true)
	held := testkit.Receive(t, g.started, 15*time.Second, "A1 to start")
	accepted(t, a1, "A1")
	state := func() string {
		got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		if err != nil {
			return err.Error()
		}
		return string(got.Status.State)
	}
	last := testkit.Receive(t, w.Updates(), 15*time.Second, "A1's append to the record")
	appended := last.Created()
	for last.Created().Sub(appended) < 2*ttl {
		select {
		case e := <-w.Updates():
			last = e
		case <-time.After(ttl):
			testkit.Eventually(t, 15*time.Second, "the record expired", func() bool {
				_, err := kv.Get(ctx, "task."+tok)
				return err != nil
			})
			t.Fatalf("the record not written again within the TTL (%v) of its write at %v after A1's append, A1 running: expired; GetTask answers %s",
				ttl, last.Created().Sub(appended), state())
		}
	}
	if _, err := keepListEntry(ctx, kv, held.requestID); err != nil {
		t.Errorf("A1's key of the keeper list, A1 running %v: %v", time.Since(appended), err)
	}
	// A1 has written no frame yet: its task is submitted.
	if got := state(); got != string(a2a.TaskStateSubmitted) {
		t.Errorf("GetTask of the task whose turn A1 runs %v after its append: %s, want submitted", time.Since(appended), got)
	}
	list, err := c.ListTasks(ctx, &a2a.ListTasksRequest{})
	if err != nil || !slices.ContainsFunc(list.Tasks, func(l *a2a.Task) bool { return l.ID == task.ID && l.Status.State == a2a.TaskStateSubmitted }) {
		t.Errorf("ListTasks: %+v %v, want the task submitted", list, err)
	}
	configs, err := c.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
	if err != nil || !slices.ContainsFunc(configs, func(c *a2a.PushConfig) bool { return c.ID == "v1" }) {
		t.Errorf("the task's push configs %v after its append, A1 running: %+v %v, want v1 (made before A1)", time.Since(appended), configs, err)
	}
	accepted(t, sendAnswer(ctx, c, task, "A2", true), "A2")
	e, err := kv.Get(ctx, "task."+tok)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		RequestIDs []string `json:"request_ids"`
	}
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.RequestIDs); n < 2 || rec.RequestIDs[n-2] != held.requestID {
		t.Errorf("the task's turns %v, want A2 queued after the running A1 %s", rec.RequestIDs, held.requestID)
	}
	got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask: %+v %v, want canceled", got, err)
	}
	select {
	case <-held.ctx.Done():
	case <-time.After(15 * time.Second):
		t.Error("A1 not cancelled by CancelTask")
	}
	// The turns ended: the replica keeps them no more, and A1's key of
	// the keeper list, made at its first look, is deleted.
	keptNoMore(t, ctx, kv, pp.Ingress)
}
