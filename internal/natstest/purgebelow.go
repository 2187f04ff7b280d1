package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// PurgeBelowLast drops every message of stream name but its last, as the
// stream's max age or byte bound drops the oldest first: a request's first
// frames aged out of E2A_RESPONSES, its last one kept (egress's and
// protocols/a2a's aged-out tests).
func PurgeBelowLast(t testing.TB, js jetstream.JetStream, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSequence(st.CachedInfo().State.LastSeq)); err != nil {
		t.Fatalf("purge %s below its last message: %v", name, err)
	}
}
