package openai_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/streams"
)

// conversationKeys is the conversation records of E2A_BRIDGE.
func conversationKeys(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, streams.BridgeBucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(keys, func(k string) bool { return !strings.HasPrefix(k, "c.") })
}

// TestOneTurnRequestNotRecorded: a request naming no conversation (no
// session, context or task) is answered without a conversation record
// (nothing a later request could continue); the next request of a session
// is recorded, and its second turn still gets the first as history.
func TestOneTurnRequestNotRecorded(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	for _, id := range []string{"one-off-1", "one-off-2"} {
		a := read(t, ask(t, p, "", id, "hello "+id, nil))
		if a.final.ResponseKind != e2a.KindComplete || a.text != "echo: hello "+id {
			t.Fatalf("%s: final %s, text %q", id, a.final.ResponseKind, a.text)
		}
		wantMessages(t, id, lastMessages(t, srv), "user: hello "+id)
	}
	if keys := conversationKeys(t, p.JS); len(keys) != 0 {
		t.Fatalf("one-turn requests left conversation records %v", keys)
	}
	session := map[string]any{"session_id": "sess-rec"}
	read(t, ask(t, p, "", "sess-1", "first", session))
	if keys := conversationKeys(t, p.JS); len(keys) != 1 {
		t.Fatalf("after a session's turn: records %v, want one", keys)
	}
	read(t, ask(t, p, "", "sess-2", "second", session))
	wantMessages(t, "second turn", lastMessages(t, srv), "user: first", "assistant: echo: first", "user: second")
}
