package push_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// deadStreamBytes makes E2A_PUSH_DEAD hold at most n bytes (DiscardOld,
// as it is defined), creating it when it is missing.
func deadStreamBytes(t testing.TB, e *env, n int64) {
	t.Helper()
	s, err := e.js.Stream(tctx(t), streams.PushDeadStream)
	cfg := streams.DefaultConfig().PushDeadStreamConfig()
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		cfg.MaxBytes = n
		_, err = e.js.CreateStream(tctx(t), cfg)
	case err == nil:
		cfg = s.CachedInfo().Config
		cfg.MaxBytes = n
		_, err = e.js.UpdateStream(tctx(t), cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestDeadLettersSharedFairly: E2A_PUSH_DEAD is one stream for every
// principal (DiscardOld). Bob's webhook refuses his updates (404): they
// are dead-lettered. Then alice's webhook refuses hers, many more bytes
// than the stream holds (256 KiB here). Bob's dead letters are all kept:
// once the stream is over half full, alice's oldest ones are removed to
// keep her within her share (1/8 of the stream by default), with a
// warning naming her. Before, the stream
// dropped its oldest messages, bob's first: `e2a push dead --principal
// bob` listed nothing after alice's fifth large message.
func TestDeadLettersSharedFairly(t *testing.T) {
	const maxBytes = 256 << 10
	e := newEnv(t)
	defer e.logOnFailure(t)
	deadStreamBytes(t, e, maxBytes)
	e.startStage()
	refuse := newReceiver(t, func(int, http.ResponseWriter) int { return http.StatusNotFound })
	e.create("bob", push.Config{TaskID: "b", URL: refuse.srv.URL})
	e.turn("bob", "b", "", "b", 2)
	var bob []push.DeadLetter
	testkit.Eventually(t, 30*time.Second, "bob's updates dead-lettered", func() bool {
		d, err := push.ListDead(context.Background(), e.nc, push.DeadFilter{Principal: "bob"}, 100)
		bob = d
		return err == nil && completedIn(d) == 1
	})
	e.create("alice", push.Config{TaskID: "a", URL: refuse.srv.URL})
	prev := ""
	for i := range 12 {
		prev = e.turnWith("alice", "a", prev, fmt.Sprint("t", i), 5, map[string]any{"pad": 8000})
	}
	var alice []push.DeadLetter
	testkit.Eventually(t, 60*time.Second, "alice's last turn dead-lettered", func() bool {
		d, err := push.ListDead(context.Background(), e.nc, push.DeadFilter{Principal: "alice"}, 1000)
		alice = d
		return err == nil && len(d) > 0 && strings.HasPrefix(d[len(d)-1].EventID, prev) && completedIn(d[len(d)-1:]) == 1
	})
	got, err := push.ListDead(tctx(t), e.nc, push.DeadFilter{Principal: "bob"}, 100)
	if err != nil || len(got) != len(bob) {
		t.Fatalf("bob has %d dead letters (%v) after alice's flood, want his %d", len(got), err, len(bob))
	}
	for i := range got {
		if got[i].EventID != bob[i].EventID {
			t.Errorf("bob's dead letter %d is %s, want %s", i, got[i].EventID, bob[i].EventID)
		}
	}
	var held int
	for _, raw := range streamData(t, e, streams.PushDeadStream) {
		if strings.Contains(raw, `"principal":"alice"`) {
			held += len(raw)
		}
	}
	// Below half the stream nothing is counted (nothing is dropped then);
	// above it, her share.
	if held > maxBytes/2 || len(alice) < 2 {
		t.Errorf("alice holds %d bytes in %d dead letters, want at most half the stream, %d", held, len(alice), maxBytes/2)
	}
	if !strings.Contains(e.log.String(), "principal=alice") || !strings.Contains(e.log.String(), "share of "+streams.PushDeadStream) {
		t.Errorf("no warning naming alice for her dead letters removed:\n%s", firstLine(e.log.String(), "dead"))
	}
}
