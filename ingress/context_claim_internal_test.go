package ingress

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// TestContextClaimKeptByItsTasks: the claim of an A2A context
// (E2A_TASKS context.<id>) expires TasksTTL after its last write, and the
// writes of the context's tasks keep it: a turn of a task writes it again
// once it may be older than 24 h (with the default TTLs: half of what
// TasksTTL's 72 h leave past E2A_REQUESTS' 24 h), so that the claim
// outlives the task's requests in the hot streams; its owner is kept, and
// a claim that expired meanwhile is made again as the task's principal's.
// A turn of a task that found the claim written less than that before
// neither reads nor writes it.
func TestContextClaimKeptByItsTasks(t *testing.T) {
	ctx := context.Background()
	ts, start, setClock := clockedTaskStore(t)
	alice := tenant.Principal{ID: "alice"}
	key, _ := taskKey(KindContext, "ctx-kept")
	claim := func() (rec TaskRecord, rev uint64) {
		t.Helper()
		e, err := ts.kv.Get(ctx, key)
		if err != nil {
			t.Fatalf("the claim at %s: %v", ts.now().Sub(start), err)
		}
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			t.Fatal(err)
		}
		return rec, e.Revision()
	}
	data, _ := json.Marshal(TaskRecord{ID: "ctx-kept", Protocol: "a2a", Principal: "alice", RequestIDs: []string{},
		Created: e2a.FormatTime(start), Updated: e2a.FormatTime(start)})
	if err := ts.create(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	base := TaskRecord{ID: "task-kept", ContextID: "ctx-kept", Protocol: "a2a", Pool: "demo", Principal: "alice"}
	turn := func(after time.Duration, id string) {
		t.Helper()
		setClock(after)
		if _, _, err := ts.appendAfter(ctx, KindTask, base, id, alice, turnCond{}); err != nil {
			t.Fatalf("turn %s: %v", id, err)
		}
	}
	if _, err := ts.AppendNew(ctx, KindTask, base, "turn-1", alice); err != nil {
		t.Fatal(err)
	}
	_, rev := claim()
	turn(time.Minute, "turn-2")
	turn(10*time.Hour, "turn-3")
	if _, r := claim(); r != rev {
		t.Errorf("the claim was written by turns of its task within a day of its claim")
	}
	turn(30*time.Hour, "turn-4")
	got, r := claim()
	if r == rev || got.Updated != e2a.FormatTime(ts.now()) || got.Principal != "alice" {
		t.Fatalf("the claim after a turn 30 h after it was written: %+v (revision %d, was %d), want it written again, alice's", got, r, rev)
	}
	turn(31*time.Hour, "turn-5")
	if _, again := claim(); again != r {
		t.Errorf("the claim written again an hour after its task wrote it")
	}
	// Expired (TasksTTL after that write) under a task still open.
	if err := ts.kv.Purge(ctx, key); err != nil {
		t.Fatal(err)
	}
	turn(60*time.Hour, "turn-6")
	if got, _ := claim(); got.Principal != "alice" || got.Updated != e2a.FormatTime(ts.now()) {
		t.Errorf("the claim made again by a turn of its task: %+v", got)
	}
}

// clockedTaskStore is a TaskStore whose clock starts at start and moves
// only when the test sets it (setClock: start + d).
func clockedTaskStore(t *testing.T) (ts *TaskStore, start time.Time, setClock func(d time.Duration)) {
	t.Helper()
	ts, _ = newTaskStore(t)
	start = time.Now().UTC()
	clock := start
	ts.now = func() time.Time { return clock }
	return ts, start, func(d time.Duration) { clock = start.Add(d) }
}

// TestClaimRemadeForTheConversationOwner: a task an admin (ops)
// started in alice's context (record: principal ops, owner alice) keeps the
// context's claim alive; when the claim expired meanwhile (e.g. written by
// an older version that never refreshed it), its next turn remakes it. It
// must be remade as alice's (the conversation's owner, TaskRecord.Owner),
// not the admin's: else alice's next new task in her own context is a
// conflict.
func TestClaimRemadeForTheConversationOwner(t *testing.T) {
	ctx := context.Background()
	ts, start, setClock := clockedTaskStore(t)
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
	setClock(30 * time.Hour)
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
