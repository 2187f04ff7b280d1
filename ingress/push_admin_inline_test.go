package ingress_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/push"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
)

// TestPushAdminInlineConfigOnOwnersTask: alice's task asks for input; an
// admin (ops) answers it twice, asking for input again each time, with an
// inline push config: v1.0 SendMessage's taskPushNotificationConfig, then
// v0.3 message/send's configuration.pushNotificationConfig. Both are
// configs of alice's task, as the admin's push-config methods make them:
// alice's answer that ends the task reaches both webhooks. They were
// stored under ops, where the push stage never looks for a turn of
// alice's: the webhooks got the admin's own turns and nothing after.
// bob (no role) sending the same messages is refused (TaskNotFound)
// and stores no config, under his id or hers.
func TestPushAdminInlineConfigOnOwnersTask(t *testing.T) {
	const aliceKey, opsKey, bobKey = "ak_pi_alice_0123456789", "ak_pi_ops_00123456789", "ak_pi_bob_00123456789"
	p, ctx := keyedPush(t, map[string]string{"alice": aliceKey, "ops": opsKey, "bob": bobKey}, map[string][]string{"ops": {"admin"}})
	alice := keyClient(t, p, a2a.TransportProtocolJSONRPC, aliceKey)
	r := pushtest.NewReceiver(t)
	task := up.Asked(t, ctx, alice, userMessage("ask:input the weather"))

	inlineV1 := func(text, id string) *a2a.SendMessageRequest {
		req := up.Reply(task, text)
		req.Config = &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{ID: id, URL: r.URL + "/" + id, Token: "tok-" + id}}
		return req
	}
	inlineV03 := func(text, id string) *a2a03.MessageSendParams {
		msg := a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: text})
		msg.TaskID, msg.ContextID = a2a03.TaskID(task.ID), task.ContextID
		return &a2a03.MessageSendParams{Message: msg,
			Config: &a2a03.MessageSendConfig{PushConfig: &a2a03.PushConfig{ID: id, URL: r.URL + "/" + id, Token: "tok-" + id}}}
	}

	bob := keyClient(t, p, a2a.TransportProtocolJSONRPC, bobKey)
	if _, err := bob.SendMessage(ctx, inlineV1("ask:input bob's", "bob-v1")); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("bob's v1.0 message with an inline config on alice's task: %v, want TaskNotFound", err)
	}
	if _, err := v03KeyClient(t, p, bobKey).SendMessage(ctx, inlineV03("ask:input bob's", "bob-v03")); err == nil {
		t.Errorf("bob's v0.3 message with an inline config on alice's task was accepted, want TaskNotFound")
	}

	ops := keyClient(t, p, a2a.TransportProtocolJSONRPC, opsKey)
	res, err := ops.SendMessage(ctx, inlineV1("ask:input which city", "ops-v1"))
	if got, ok := res.(*a2a.Task); err != nil || !ok || got.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("the admin's v1.0 answer: %T %+v %v, want the task input-required", res, res, err)
	}
	res03, err := v03KeyClient(t, p, opsKey).SendMessage(ctx, inlineV03("ask:input which day", "ops-v03"))
	if got, ok := res03.(*a2a03.Task); err != nil || !ok || got.Status.State != a2a03.TaskStateInputRequired {
		t.Fatalf("the admin's v0.3 answer: %T %+v %v, want the task input-required", res03, res03, err)
	}
	res, err = alice.SendMessage(ctx, up.Reply(task, "sunny"))
	if done, ok := res.(*a2a.Task); err != nil || !ok || done.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("alice's answer: %T %+v %v", res, res, err)
	}
	for path, state := range map[string]string{"/ops-v1": string(a2a.TaskStateCompleted), "/ops-v03": string(a2a03.TaskStateCompleted)} {
		ds := r.Await(t, 20*time.Second, path, state)
		if last := ds[len(ds)-1]; last.TaskID != string(task.ID) || last.Token != "tok"+strings.ReplaceAll(path, "/", "-") {
			t.Errorf("%s's last update %+v: want task %s with the admin's token", path, last, task.ID)
		}
	}

	st, err := push.NewStore(ctx, p.nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"alice", "ops", "bob"} {
		cs, _, err := st.List(ctx, who, string(task.ID), 0, "")
		if err != nil {
			t.Fatalf("configs of %s: %v", who, err)
		}
		var ids []string
		for _, c := range cs {
			ids = append(ids, c.ID)
		}
		if want := map[string]int{"alice": 2}[who]; len(cs) != want {
			t.Errorf("configs of alice's task under %s: %v, want %d (the admin's two, none of bob's)", who, ids, want)
		}
	}
}
