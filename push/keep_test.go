package push_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestKeepWritesAgainWhatExists: Store.Keep (ingress's keeper, while a
// turn of the task runs) writes a task's config key and its configs'
// cursors again, the same bytes, when they were written at least its
// age ago, and nothing younger; a config without a cursor gets none,
// and a task key deleted (its last config deleted by the user) stays
// deleted.
func TestKeepWritesAgainWhatExists(t *testing.T) {
	e := newEnv(t)
	ctx := tctx(t)
	kv, err := e.js.KeyValue(ctx, streams.PushBucket)
	if err != nil {
		t.Fatal(err)
	}
	r := newReceiver(t, nil)
	e.create("alice", push.Config{TaskID: "t1", ID: "a", URL: r.srv.URL})
	e.create("alice", push.Config{TaskID: "t1", ID: "b", URL: r.srv.URL})
	cur := push.CursorKey("alice", "t1", "a")
	if _, err := kv.Put(ctx, cur, []byte(`{"seq":7}`)); err != nil {
		t.Fatal(err)
	}
	key := push.TaskKey("alice", "t1")
	get := func(k string) jetstream.KeyValueEntry {
		t.Helper()
		en, err := kv.Get(ctx, k)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		return en
	}
	cfg0, cur0 := get(key), get(cur)
	if err := e.store.Keep(ctx, "alice", "t1", time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := get(key).Revision(); got != cfg0.Revision() {
		t.Errorf("config key written again though younger than the age asked: revision %d, was %d", got, cfg0.Revision())
	}
	if err := e.store.Keep(ctx, "alice", "t1", 0); err != nil {
		t.Fatal(err)
	}
	for _, was := range []jetstream.KeyValueEntry{cfg0, cur0} {
		now := get(was.Key())
		if now.Revision() <= was.Revision() || string(now.Value()) != string(was.Value()) {
			t.Errorf("%s: revision %d (was %d), value %s (was %s); want written again as it was", was.Key(), now.Revision(), was.Revision(), now.Value(), was.Value())
		}
	}
	if _, err := kv.Get(ctx, push.CursorKey("alice", "t1", "b")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the cursor of a config that had none: %v, want none made", err)
	}
	for _, id := range []string{"a", "b"} {
		if err := e.store.Delete(ctx, "alice", "t1", id); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.store.Keep(ctx, "alice", "t1", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, key); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the task's configs, all deleted, after Keep: %v, want still deleted", err)
	}
	if got, _, err := e.store.List(ctx, "alice", "t1", 0, ""); err != nil || len(got) != 0 {
		t.Errorf("List after the deletes and Keep: %+v %v, want none", got, err)
	}
}
