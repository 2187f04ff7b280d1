package ingress_test

// Push notifications of a task whose turn ends with another queued
// behind it, at its edges: a turn recorded and never stored, a cancel of
// both turns, the v0.3 body against GetTask.

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// turnEndPosted waits until path got a status update (v1.0) or Task (v0.3)
// whose event id is of request requestID and whose state is not working,
// and returns it (the turn's end).
func turnEndPosted(t *testing.T, r *pushtest.Receiver, path, requestID string) pushtest.Delivery {
	t.Helper()
	var end pushtest.Delivery
	testkit.Eventually(t, 20*time.Second, path+": the end of turn "+requestID, func() bool {
		for _, d := range r.Of(path) {
			if strings.HasPrefix(d.EventID, requestID+":") && (d.Kind == "status" || d.Kind == "task") &&
				d.State != "" && d.State != string(a2a03.TaskStateWorking) && d.State != string(a2a.TaskStateWorking) {
				end = d
				return true
			}
		}
		return false
	})
	return end
}

// TestPushUnstoredQueuedTurnWaitedFor: the task's record lists a turn
// after Paris that is never stored (recorded, then ingress died before
// its publish, or the publish failed and the record could not be taken
// back). The stage waits for it up to the publish timeout, as the
// blocking answer does, then posts Paris's end as its frame says: the
// webhook's last update is the state GetTask answers (completed). It was
// posted submitted at once, and nothing followed: the webhook's last word
// was "submitted" for good.
func TestPushUnstoredQueuedTurnWaitedFor(t *testing.T) {
	pt := startPushedParis(t)
	g, ctx, c, task, r, paris := pt.g, pt.ctx, pt.c, pt.task, pt.r, pt.paris
	rec := record(t, g.JS, ingress.KindTask, string(task.ID))
	ts, err := ingress.NewTaskStore(ctx, g.JS)
	if err != nil {
		t.Fatal(err)
	}
	ghost := "0190aaaa-0000-7000-8000-00000000dead"
	if _, err := ts.Append(ctx, ingress.KindTask, *rec, ghost, tenant.Principal{Open: true}); err != nil {
		t.Fatal(err)
	}
	close(g.gates["Paris"])
	if err := testkit.Receive(t, paris, 30*time.Second, "Paris's answer"); err != nil {
		t.Fatalf("Paris: %v", err)
	}
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	turnEndPosted(t, r, "/v1", rec.RequestIDs[1])
	if !testkit.Until(10*time.Second, func() bool {
		ds := r.Of("/v1")
		return len(ds) > 0 && ds[len(ds)-1].State == string(got.Status.State)
	}) {
		ds := r.Of("/v1")
		t.Errorf("the webhook's last update says %s (for good: nothing of the unstored turn will come) while GetTask says %s:\n%s",
			ds[len(ds)-1].State, got.Status.State, states(ds))
	}
}

// TestPushCancelWithQueuedTurnEndsCanceled: alice cancels her task while
// Paris runs and Rome is queued behind it. tasks/cancel cancels the
// newest turn first, so that it never runs, and the agent runtime stores
// Rome's end (canceled) after Paris's, as Rome would have run. Paris's
// end, with Rome queued behind it, is posted submitted; Rome's, the
// task's end, canceled, once: the webhooks' last update is the task
// canceled, as GetTask says, and no other update is terminal. Rome's end
// was stored first: canceled was posted for it, then again for Paris's
// (the cursor had passed Rome's), two terminal updates for one task, the
// first while Paris still ran.
func TestPushCancelWithQueuedTurnEndsCanceled(t *testing.T) {
	pt := startPushedParis(t)
	ctx, c, task, r := pt.ctx, pt.c, pt.task, pt.r
	rec, rome := pt.sendRome(t)
	if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID}); err != nil {
		t.Fatalf("CancelTask: %v", err)
	}
	testkit.Receive(t, pt.paris, 20*time.Second, "Paris's answer")
	testkit.Receive(t, rome, 20*time.Second, "Rome's answer")
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("GetTask after the cancel: %+v %v", got, err)
	}
	for path, want := range map[string]string{"/v1": string(a2a.TaskStateCanceled), "/v03": string(a2a03.TaskStateCanceled)} {
		turnEndPosted(t, r, path, rec.RequestIDs[2])
		seen := map[string]bool{}
		var terminal []string
		ds := r.Of(path)
		for _, d := range ds {
			if seen[d.EventID] {
				continue // a redelivery
			}
			seen[d.EventID] = true
			if d.State == want || d.State == string(a2a.TaskStateCompleted) || d.State == string(a2a03.TaskStateCompleted) {
				terminal = append(terminal, d.EventID)
			}
		}
		last := ds[len(ds)-1]
		if len(terminal) != 1 || last.State != want || !strings.HasPrefix(last.EventID, rec.RequestIDs[2]+":") {
			t.Errorf("%s: want one terminal update, the task %s at Rome's end (GetTask says so); it got:\n%s", path, want, states(ds))
		}
	}
}

// TestPushV03BodyIsGetTaskWhileQueued: at Paris's end, Rome
// queued behind it, the v0.3 webhook's Task is the one the v0.3 client's
// GetTask answers while Rome waits (its turn started, no frame written).
func TestPushV03BodyIsGetTaskWhileQueued(t *testing.T) {
	pt := startPushedParis(t)
	g, ctx, task, r := pt.g, pt.ctx, pt.task, pt.r
	c03 := v03ClientAt(t, g.URL)
	rec, rome := pt.sendRome(t)
	close(g.gates["Paris"])
	if s := testkit.Receive(t, g.started, 10*time.Second, "Rome started"); s != "Rome" {
		t.Fatalf("started %q", s)
	}
	// Rome holds before writing anything: the task waits in it.
	got, err := c03.GetTask(ctx, &a2a03.TaskQueryParams{ID: a2a03.TaskID(task.ID)})
	if err != nil {
		t.Fatal(err)
	}
	end := turnEndPosted(t, r, "/v03", rec.RequestIDs[1])
	close(g.gates["Rome"])
	for _, ch := range []<-chan error{pt.paris, rome} {
		if err := testkit.Receive(t, ch, 20*time.Second, "the answers"); err != nil {
			t.Fatal(err)
		}
	}
	var posted a2a03.Task
	if err := json.Unmarshal(end.Body, &posted); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(got)
	have, _ := json.Marshal(&posted)
	if string(want) != string(have) {
		t.Errorf("v0.3 Task posted at Paris's end:\n%s\nGetTask while Rome waits:\n%s", have, want)
	}
}
