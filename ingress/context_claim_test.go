package ingress_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestContextTakenOverKeepsTheTaskOwner: a later turn of an A2A task is
// its record's principal's conversation, whatever the claim of its context
// (E2A_TASKS context.<id>) says by then. The claim is kept alive by the
// writes of the context's tasks (TestContextClaimKeptByItsTasks); here it
// is gone anyway (purged: as if it had expired) while alice's task waits
// for its answer, and bob claims the context id. An admin's answer to
// alice's task still names alice as its conversation owner
// (e2a.Envelope.Owner), not bob, so a bridge never keys it to bob's
// upstream conversation.
func TestContextTakenOverKeepsTheTaskOwner(t *testing.T) {
	const aliceKey, bobKey, opsKey = "ak_ctx_alice_0123456789", "ak_ctx_bob_00123456789", "ak_ctx_ops_00123456789"
	auth := pipetest.KeyAuth(t, map[string]string{"alice": aliceKey, "bob": bobKey, "ops": opsKey}, map[string][]string{"ops": {"admin"}})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(auth)))
	p.Pool("demo", demo.New())
	const ctxID = "ctx-chosen-by-alice"
	send := func(key, field, text string) map[string]any {
		t.Helper()
		_, b := testkit.Do(t, http.MethodPost, p.URL+"/a2a?agent=demo", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{`+
			field+`,"kind":"message","role":"user","messageId":"m-`+text[:6]+`","parts":[{"kind":"text","text":"`+text+`"}]}}}`,
			"X-Api-Key", key)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}
	res := send(aliceKey, `"contextId":"`+ctxID+`"`, "ask:input alice-topic")
	task, _ := res["result"].(map[string]any)
	taskID, _ := task["id"].(string)
	if raw, _ := json.Marshal(res); taskID == "" || !strings.Contains(string(raw), "input-required") {
		t.Fatalf("alice's first turn: %v", res)
	}
	// The context's claim is gone; alice's task, interrupted, is still
	// open.
	ctx := context.Background()
	kv, err := p.JS.KeyValue(ctx, streams.TasksBucket)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := subjects.EncodeID(ctxID)
	if err := kv.Purge(ctx, "context."+tok); err != nil {
		t.Fatal(err)
	}
	if m := send(bobKey, `"contextId":"`+ctxID+`"`, "bob-hello"); m["error"] != nil {
		t.Fatalf("bob's message in the expired context: %v", m)
	}
	if m := send(opsKey, `"taskId":"`+taskID+`"`, "ops-answer"); m["error"] != nil {
		t.Fatalf("the admin's answer to alice's task: %v", m)
	}
	store, err := ingress.NewTaskStore(ctx, p.JS)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := store.Get(ctx, ingress.KindTask, taskID)
	if err != nil || rec.Principal != "alice" {
		t.Fatalf("alice's task record: %+v %v", rec, err)
	}
	msg, err := streams.LastBySubject(ctx, p.NC, streams.RequestsStream, "e2a.req.*."+rec.LastRequest())
	if err != nil {
		t.Fatal(err)
	}
	env, err := e2a.FromJSON(msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	if env.UserID != "ops" || env.Owner() != "alice" {
		t.Errorf("the admin's turn of alice's task: user_id %q, conversation owner %q; want ops, alice (the task's owner), not the principal who took the context id over", env.UserID, env.Owner())
	}
}
