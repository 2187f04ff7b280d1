package ingress

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// TestClaimRemadeForTheConversationOwner: a task an admin (ops)
// started in alice's context (record: principal ops, owner alice) keeps the
// context's claim alive; when the claim expired meanwhile (e.g. written by
// an older version that never refreshed it), its next turn remakes it. It
// must be remade as alice's (the conversation's owner, TaskRecord.Owner),
// not the admin's: else alice's next new task in her own context is a
// conflict.
func TestClaimRemadeForTheConversationOwner(t *testing.T) {
	ctx := context.Background()
	ts, _ := newTaskStore(t)
	start := time.Now().UTC()
	clock := start
	ts.now = func() time.Time { return clock }
	ops := tenant.Principal{ID: "ops", Roles: []tenant.Role{tenant.RoleAdmin}}
	rec := TaskRecord{ID: "t-ops", ContextID: "ctx-alice", Protocol: "a2a", Pool: "demo", Principal: "ops", Owner: "alice",
		RequestIDs: []string{"t-ops", "t-ops-2"}, Created: e2a.FormatTime(start), Updated: e2a.FormatTime(start),
		ContextClaimed: e2a.FormatTime(start)}
	key, _ := taskKey(KindTask, rec.ID)
	data, _ := json.Marshal(rec)
	if err := ts.create(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	// The claim is gone (expired); the admin answers the task 30 h later.
	clock = start.Add(30 * time.Hour)
	if _, _, err := ts.appendAfter(ctx, KindTask, TaskRecord{ID: rec.ID, ContextID: rec.ContextID, Protocol: "a2a", Pool: "demo", Principal: "ops"},
		"t-ops-3", ops, turnCond{}); err != nil {
		t.Fatal(err)
	}
	got, err := ts.Get(ctx, KindContext, "ctx-alice")
	if err != nil {
		t.Fatal(err)
	}
	if got.Principal != "alice" {
		t.Errorf("claim of alice's context remade by the admin's task as %q's, want alice's", got.Principal)
	}
	alice := tenant.Principal{ID: "alice"}
	if !alice.Allows(tenant.Write, got.Principal) {
		t.Errorf("alice may no longer start a task in her own context")
	}
}
