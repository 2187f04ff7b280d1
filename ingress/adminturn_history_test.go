package ingress_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestAdminTurnReadOnceItsEnvelopeIsGone: an admin (ops) answered
// alice's interrupted task; the task completed. The frames of a request are
// stored after its envelope and the two streams drop them apart, so for a
// while (or, with E2A_RESPONSES_MAX_AGE above E2A_REQUESTS_MAX_AGE, for
// long) only the frames of the admin's turn are left: they name ops
// (e2a.ResponseFor copies the envelope's user_id), not alice. The record
// lists ops among its writers (TaskRecord.Writers, host.Session.OwnsFrames),
// so the turn stays the task's: alice (and an auditor) read her task
// completed, not input-required again.
func TestAdminTurnReadOnceItsEnvelopeIsGone(t *testing.T) {
	const aliceKey, opsKey, audKey = "ak_rv2_alice_0123456789", "ak_rv2_ops_00123456789", "ak_rv2_aud_00123456789"
	auth := pipetest.KeyAuth(t, map[string]string{"alice": aliceKey, "ops": opsKey, "aud": audKey},
		map[string][]string{"ops": {"admin"}, "aud": {"audit"}})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(auth)))
	p.Pool("demo", demo.New())
	call := func(key, body string) string {
		t.Helper()
		_, b := testkit.Do(t, http.MethodPost, p.URL+"/a2a?agent=demo", body, "X-Api-Key", key)
		return string(b)
	}
	b := call(aliceKey, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m-1","parts":[{"kind":"text","text":"ask:input alice-topic"}]}}}`)
	i := strings.Index(b, `"id":"`)
	j := strings.Index(b, `"kind":"task"`)
	if !strings.Contains(b, "input-required") || i < 0 || j < 0 {
		t.Fatalf("alice's first turn: %s", b)
	}
	// The task id: result.id.
	var taskID string
	if k := strings.Index(b, `"result":`); k >= 0 {
		rest := b[k:]
		if m := strings.Index(rest, `"id":"`); m >= 0 {
			rest = rest[m+6:]
			taskID = rest[:strings.Index(rest, `"`)]
		}
	}
	if strings.Contains(taskID, "m-") || taskID == "" {
		t.Fatalf("task id %q in %s", taskID, b)
	}
	if b := call(opsKey, `{"jsonrpc":"2.0","id":2,"method":"message/send","params":{"message":{"taskId":"`+taskID+`","kind":"message","role":"user","messageId":"m-2","parts":[{"kind":"text","text":"ops-answer"}]}}}`); !strings.Contains(b, `"completed"`) {
		t.Fatalf("the admin's answer: %s", b)
	}
	get := `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"id":"` + taskID + `"}}`
	if b := call(aliceKey, get); !strings.Contains(b, `"completed"`) {
		t.Fatalf("alice's tasks/get before: %s", b)
	}
	ctx := context.Background()
	store, err := ingress.NewTaskStore(ctx, p.JS)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := store.Get(ctx, ingress.KindTask, taskID)
	if err != nil || len(rec.RequestIDs) != 2 {
		t.Fatalf("record %+v %v", rec, err)
	}
	// The admin's request's envelope left E2A_REQUESTS; its frames are left.
	s, err := p.JS.Stream(ctx, streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	subj, _ := subjects.RequestAnyPool(rec.LastRequest())
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
		t.Fatal(err)
	}
	for _, who := range []struct{ name, key string }{{"alice", aliceKey}, {"auditor", audKey}, {"admin", opsKey}} {
		if b := call(who.key, get); !strings.Contains(b, `"completed"`) {
			state := "?"
			if k := strings.Index(b, `"state":"`); k >= 0 {
				state = b[k+9:]
				state = state[:strings.Index(state, `"`)]
			}
			t.Errorf("%s's tasks/get once the admin's turn's envelope is gone: state %s, want completed", who.name, state)
		}
	}
}
