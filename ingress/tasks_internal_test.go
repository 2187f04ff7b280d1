package ingress

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestTaskStoreLeaderValue: the confirmation TaskStore.Get asks of the
// bucket's leader when a direct get finds no record (a replica may lag one
// just created) reads the record, and nothing for a key never written,
// deleted or purged; Get then reports ErrTaskNotFound for those.
func TestTaskStoreLeaderValue(t *testing.T) {
	ctx := context.Background()
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	ts, err := NewTaskStore(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"kept", "deleted", "purged"} {
		key, _ := taskKey(KindSession, id)
		if err := ts.create(ctx, key, []byte(`{"id":"`+id+`","principal":"alice"}`)); err != nil {
			t.Fatal(err)
		}
	}
	kept, _ := taskKey(KindSession, "kept")
	if v, err := ts.leaderValue(ctx, kept); err != nil || string(v) != `{"id":"kept","principal":"alice"}` {
		t.Fatalf("leader value of a stored record: %q %v", v, err)
	}
	deleted, _ := taskKey(KindSession, "deleted")
	purged, _ := taskKey(KindSession, "purged")
	if err := ts.kv.Delete(ctx, deleted); err != nil {
		t.Fatal(err)
	}
	if err := ts.kv.Purge(ctx, purged); err != nil {
		t.Fatal(err)
	}
	never, _ := taskKey(KindSession, "never")
	for _, key := range []string{deleted, purged, never} {
		if v, err := ts.leaderValue(ctx, key); err != nil || v != nil {
			t.Errorf("leader value of %s: %q %v, want none", key, v, err)
		}
		if _, err := ts.kv.Get(ctx, key); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("direct get of %s: %v", key, err)
		}
	}
	for _, id := range []string{"deleted", "purged", "never"} {
		if _, err := ts.Get(ctx, KindSession, id); !errors.Is(err, ErrTaskNotFound) {
			t.Errorf("Get %s: %v, want ErrTaskNotFound", id, err)
		}
	}
	if rec, err := ts.Get(ctx, KindSession, "kept"); err != nil || rec.Principal != "alice" {
		t.Errorf("Get kept: %+v %v", rec, err)
	}
}
