package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestKeepClaimWritesAgainWhatExists: keepClaim (the keeper's, for the
// context of a one-turn task while its turn runs) writes a context's
// claim again, its owner kept, when it was written at least its age ago,
// nothing younger, and never makes one that is gone (taken back or
// expired).
func TestKeepClaimWritesAgainWhatExists(t *testing.T) {
	ctx := context.Background()
	ts, _ := newTaskStore(t)
	key, _ := taskKey(KindContext, "ctx-1")
	data, _ := json.Marshal(contextRecord("ctx-1", "alice", time.Now()))
	rev, err := ts.createRev(ctx, key, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.keepClaim(ctx, "ctx-1", time.Hour); err != nil {
		t.Fatal(err)
	}
	if e, err := ts.kv.Get(ctx, key); err != nil || e.Revision() != rev {
		t.Fatalf("a claim younger than the age asked: %v, revision %d, want %d (not written)", err, e.Revision(), rev)
	}
	if err := ts.keepClaim(ctx, "ctx-1", 0); err != nil {
		t.Fatal(err)
	}
	e, err := ts.kv.Get(ctx, key)
	if err != nil || e.Revision() == rev {
		t.Fatalf("the claim after keepClaim: %v, revision %d (was %d), want written again", err, e.Revision(), rev)
	}
	if rec, err := decodeRecord(key, e.Value()); err != nil || rec.Principal != "alice" {
		t.Errorf("the claim written again: %+v %v, want alice's", rec, err)
	}
	if err := ts.dropContext(ctx, "ctx-1", e.Revision()); err != nil {
		t.Fatal(err)
	}
	if err := ts.keepClaim(ctx, "ctx-1", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.kv.Get(ctx, key); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("a claim taken back, after keepClaim: %v, want still gone", err)
	}
}
