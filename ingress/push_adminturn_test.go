package ingress_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/pushtest"
)

// TestPushAdminTurnPostedToOwner: alice's task asks for input; she
// registers a v1.0 push config (a2a-go/v2 client) and a v0.3 one (a2a-go
// v0.3 client); an admin (ops) answers the task for her. The answer's
// turn is her task's (tasks/get shows it to her), so her webhooks get its
// updates, to the task completed: the v0.3 Task with her question and
// ops's answer in its history. Before, the push stage read the configs of
// the envelope's principal (ops, who has none on the task), and alice's
// webhooks got nothing of the turn that ended her task.
func TestPushAdminTurnPostedToOwner(t *testing.T) {
	a := startAliceAsked(t)
	ctx, task, r := a.ctx, a.task, a.r
	res, err := a.ops.SendMessage(ctx, up.Reply(task, "sunny"))
	if done, ok := res.(*a2a.Task); err != nil || !ok || done.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("the admin's answer: %T %+v %v", res, res, err)
	}
	ds := r.Await(t, 20*time.Second, "/v1", string(a2a.TaskStateCompleted))
	checkDeliveries(t, ds, string(task.ID), "tok-v1", "", string(a2a.TaskStateCompleted))
	v03 := r.Await(t, 20*time.Second, "/v03", string(a2a03.TaskStateCompleted))
	var last a2a03.Task
	if err := json.Unmarshal(v03[len(v03)-1].Body, &last); err != nil {
		t.Fatal(err)
	}
	var history []string
	for _, m := range last.History {
		for _, part := range m.Parts {
			if tp, ok := part.(a2a03.TextPart); ok {
				history = append(history, string(m.Role)+":"+tp.Text)
			}
		}
	}
	if h := strings.Join(history, " | "); !strings.Contains(h, "user:ask:input the weather") || !strings.Contains(h, "user:sunny") {
		t.Errorf("v0.3 Task at the end: history %q, want alice's question and ops's answer", h)
	}
}

// keyedPush is a pipeline with push, the demo agent its pool, whose
// principals are keys' (name: API key) with roles, and a context for the
// test's calls (ended at its end).
func keyedPush(t *testing.T, keys map[string]string, roles map[string][]string) (*pipeline, context.Context) {
	t.Helper()
	pp := pipetest.Start(t, pipetest.WithPush("127.0.0.1"), pipetest.WithIngress(ingress.WithAuth(pipetest.KeyAuth(t, keys, roles))))
	pp.Pool("demo", demo.New())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return &pipeline{url: pp.URL, nc: pp.NC, js: pp.JS, in: pp.Ingress}, ctx
}

// aliceAsked is a pipeline with push whose principals are alice and ops
// (an admin), the demo agent its pool: alice's task asked for input
// (ctx, her a2a-go/v2 client alice), her v1.0 push config on it (r's
// /v1, token tok-v1) and her v0.3 one (r's /v03, made with the a2a-go v0.3
// client, token tok-v03), and ops's a2a-go/v2 client.
type aliceAsked struct {
	ctx        context.Context
	alice, ops *a2aclient.Client
	task       *a2a.Task
	r          *pushtest.Receiver
}

func startAliceAsked(t *testing.T) *aliceAsked {
	t.Helper()
	const aliceKey, opsKey = "ak_pa_alice_0123456789", "ak_pa_ops_00123456789"
	p, ctx := keyedPush(t, map[string]string{"alice": aliceKey, "ops": opsKey}, map[string][]string{"ops": {"admin"}})
	a := &aliceAsked{ctx: ctx, alice: keyClient(t, p, a2a.TransportProtocolJSONRPC, aliceKey),
		ops: keyClient(t, p, a2a.TransportProtocolJSONRPC, opsKey), r: pushtest.NewReceiver(t)}
	a.task = up.Asked(t, ctx, a.alice, userMessage("ask:input the weather"))
	if _, err := a.alice.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: a.task.ID, ID: "v1", URL: a.r.URL + "/v1", Token: "tok-v1"}); err != nil {
		t.Fatalf("CreateTaskPushConfig: %v", err)
	}
	if _, err := v03KeyClient(t, p, aliceKey).SetTaskPushConfig(ctx, &a2a03.TaskPushConfig{TaskID: a2a03.TaskID(a.task.ID),
		Config: a2a03.PushConfig{ID: "v03", URL: a.r.URL + "/v03", Token: "tok-v03"}}); err != nil {
		t.Fatalf("tasks/pushNotificationConfig/set: %v", err)
	}
	return a
}

// TestPushAdminTurnQueuedFollowed: alice's answer "Paris" runs while an
// admin (ops) answers her task "Rome", queued behind it. Alice's webhook
// gets Paris's end submitted (the task goes on with ops's turn, as her
// streams and tasks/get show it), then Rome's updates, the last one the
// task completed. Before, push followed only a turn whose envelope named
// alice: her webhook got Paris's end completed, and nothing of Rome's.
func TestPushAdminTurnQueuedFollowed(t *testing.T) {
	const aliceKey, opsKey = "ak_pq_alice_0123456789", "ak_pq_ops_00123456789"
	auth := pipetest.KeyAuth(t, map[string]string{"alice": aliceKey, "ops": opsKey}, map[string][]string{"ops": {"admin"}})
	pp := pipetest.Start(t, pipetest.WithPush("127.0.0.1"), pipetest.WithIngress(ingress.WithAuth(auth), ingress.WithDefaultPool("gated")))
	g := startQueuedTaskOn(t, pp, helloReply, "Paris", "Rome")
	p := &pipeline{url: pp.URL, nc: pp.NC, js: pp.JS, in: pp.Ingress}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice := keyClient(t, p, a2a.TransportProtocolJSONRPC, aliceKey)
	task := up.Asked(t, ctx, alice, up.Msg("the weather"))
	r := pushtest.NewReceiver(t)
	if _, err := alice.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "v1", URL: r.URL + "/v1", Token: "tok-v1"}); err != nil {
		t.Fatalf("CreateTaskPushConfig: %v", err)
	}
	paris := make(chan error, 1)
	go func() {
		_, err := alice.SendMessage(ctx, up.Reply(task, "Paris"))
		paris <- err
	}()
	if s := <-g.started; s != "Paris" {
		t.Fatalf("started %q", s)
	}
	queueRome(t, ctx, g, keyClient(t, p, a2a.TransportProtocolJSONRPC, opsKey), task)
	if err := <-paris; err != nil {
		t.Fatalf("Paris: %v", err)
	}
	v1 := awaitRome(t, r, "/v1", string(a2a.TaskStateCompleted))
	noEarlyEnd(t, "v1.0", v1, func(s string) bool { return a2a.TaskState(s).Terminal() })
}
