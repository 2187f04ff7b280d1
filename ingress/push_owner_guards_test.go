package ingress_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/nats-io/nats.go/jetstream"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestPushAdminCancelPostedToOwner: alice's task asks for input;
// she registers a v1.0 and a v0.3 push config; an admin (ops) cancels
// it (tasks/cancel of an interrupted task: a cancel turn, ops's, of
// alice's task). Her webhooks get the task canceled: the v1.0 status
// update, the v0.3 Task canceled.
func TestPushAdminCancelPostedToOwner(t *testing.T) {
	a := startAliceAsked(t)
	ctx, task, r := a.ctx, a.task, a.r
	got, err := a.ops.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("the admin's cancel: %+v %v", got, err)
	}
	ds := r.Await(t, 20*time.Second, "/v1", string(a2a.TaskStateCanceled))
	if last := ds[len(ds)-1]; last.TaskID != string(task.ID) || last.Token != "tok-v1" || last.Kind != "status" {
		t.Errorf("v1.0 webhook's last update %+v: want task %s's canceled status update with token tok-v1", last, task.ID)
	}
	v03 := r.Await(t, 20*time.Second, "/v03", string(a2a03.TaskStateCanceled))
	if last := v03[len(v03)-1]; last.TaskID != string(task.ID) || last.Token != "tok-v03" || last.Kind != "task" {
		t.Errorf("v0.3 webhook's last update %+v: want task %s canceled (a Task) with token tok-v03", last, task.ID)
	}
	for _, d := range append(r.Of("/v1"), r.Of("/v03")...) {
		if d.State == string(a2a.TaskStateCompleted) || d.State == string(a2a03.TaskStateCompleted) {
			t.Errorf("a webhook got the task completed: %s", d.Body)
		}
	}
}

// TestPushAdminTaskInOwnersContextNotHers: an admin (ops)
// starts a task in alice's A2A context (its record's principal ops, its
// owner alice: TaskRecord.Owner, so its turns name alice as their
// conversation's owner and the push stage reads alice's configs of it).
// The task is ops's by the ownership rule: alice neither reads it nor
// registers a push config on it (TaskNotFound), so nothing of it can
// reach her webhooks; ops registers one and gets its updates.
func TestPushAdminTaskInOwnersContextNotHers(t *testing.T) {
	const aliceKey, opsKey = "ak_rx_alice_0123456789", "ak_rx_ops_00123456789"
	p, ctx := keyedPush(t, map[string]string{"alice": aliceKey, "ops": opsKey}, map[string][]string{"ops": {"admin"}})
	alice := keyClient(t, p, a2a.TransportProtocolJSONRPC, aliceKey)
	first := up.Asked(t, ctx, alice, userMessage("ask:input the weather"))
	ops := keyClient(t, p, a2a.TransportProtocolJSONRPC, opsKey)
	msg := userMessage("ask:input the tide")
	msg.Message.ContextID = first.ContextID
	task := up.Asked(t, ctx, ops, msg)
	if task.ID == first.ID || task.ContextID != first.ContextID {
		t.Fatalf("the admin's task %s in context %s: want a new task in alice's context %s", task.ID, task.ContextID, first.ContextID)
	}
	if _, err := alice.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("alice's GetTask of the admin's task in her context: %v; want TaskNotFound", err)
	}
	r := pushtest.NewReceiver(t)
	if _, err := alice.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "a", URL: r.URL + "/alice"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("alice's CreateTaskPushConfig on the admin's task: %v; want TaskNotFound", err)
	}
	if _, err := ops.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "o", URL: r.URL + "/ops"}); err != nil {
		t.Fatalf("ops's CreateTaskPushConfig: %v", err)
	}
	if res, err := ops.SendMessage(ctx, up.Reply(task, "high")); err != nil {
		t.Fatalf("ops's answer: %T %v", res, err)
	}
	r.Await(t, 20*time.Second, "/ops", string(a2a.TaskStateCompleted))
	if got := r.Of("/alice"); len(got) > 0 {
		t.Errorf("alice's webhook got %d updates of the admin's task: %s", len(got), got[0].Body)
	}
}

// TestPushForgedOwnerNotPushedAfterReuse: alice's one-turn task
// (interrupted, a push config on it) ages out of the hot streams, so its
// id is free while her config lives on (E2A_TASKS_TTL). bob takes the id
// as an E2A task_id, his envelope naming alice as the conversation's owner
// (provenance.details, exact and in other casings). Ingress drops the
// claim: the push stage reads bob's configs only, and alice's webhook
// gets nothing of bob's turn.
func TestPushForgedOwnerNotPushedAfterReuse(t *testing.T) {
	const aliceKey, bobKey = "ak_rf_alice_0123456789", "ak_rf_bob_000123456789"
	p, ctx := keyedPush(t, map[string]string{"alice": aliceKey, "bob": bobKey}, nil)
	alice := keyClient(t, p, a2a.TransportProtocolJSONRPC, aliceKey)
	task := up.Asked(t, ctx, alice, userMessage("ask:input the weather"))
	r := pushtest.NewReceiver(t)
	if _, err := alice.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "v1", URL: r.URL + "/v1", Token: "tok-v1"}); err != nil {
		t.Fatalf("CreateTaskPushConfig: %v", err)
	}
	// Later: her request and its frames aged out (max age).
	for stream, subj := range map[string]string{streams.RequestsStream: mustSubj(subjects.RequestAnyPool(string(task.ID))),
		streams.ResponsesStream: mustSubj(subjects.Response(string(task.ID)))} {
		st, err := p.js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			t.Fatal(err)
		}
	}
	body := `{"request_id":"rv-forge-bob","task_id":"` + string(task.ID) + `","params":{"text":"bob-secret"},` +
		`"provenance":{"source_protocol":"e2a","details":{"conversation_owner":"alice","Conversation_Owner":"alice","CONVERSATION_OWNER":"alice"}}}`
	resp, b := testkit.Do(t, http.MethodPost, p.url+"/v1/requests?wait=true", body, "Content-Type", "application/json", "X-Api-Key", bobKey)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("bob's turn under alice's aged-out task id: %d %s", resp.StatusCode, b)
	}
	last, err := streams.LastBySubject(ctx, p.nc, streams.ResponsesStream, mustSubj(subjects.Response("rv-forge-bob")))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the push stage past bob's final frame", func() bool {
		c, err := p.js.Consumer(ctx, streams.ResponsesStream, push.DefaultConsumer)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.AckFloor.Stream >= last.Seq && info.NumAckPending == 0
	})
	if got := r.All(); len(got) > 0 {
		t.Errorf("alice's webhook got %d updates of bob's turn: %s", len(got), got[0].Body)
	}
}

func mustSubj(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}
