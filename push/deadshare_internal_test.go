package push

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// deadStage is a stage that stores dead letters only, on an
// E2A_PUSH_DEAD of maxBytes, and the stream.
func deadStage(t *testing.T, ctx context.Context, maxBytes int64) (*stage, jetstream.Stream) {
	t.Helper()
	_, nc := natstest.RunServer(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := natstest.Config().PushDeadStreamConfig()
	cfg.MaxBytes = maxBytes
	st, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return &stage{ctx: ctx, nc: nc, js: js, o: options{deadShare: DefaultDeadShare}, metrics: m,
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}, st
}

// deadOf stores n dead letters of principal of size bytes each, as the
// stage does (storeDead) when tallied, directly when not.
func deadOf(t *testing.T, s *stage, principal string, from, n, size int, tallied bool) {
	t.Helper()
	for i := from; i < from+n; i++ {
		ref := configRef{principal, "task", "c"}
		id := fmt.Sprintf("%s:%d", ref.tokens(), i)
		b := bytes.Repeat([]byte("x"), size)
		var err error
		if tallied {
			err = s.storeDead(principal, ref.deadSubject(), id, b)
		} else {
			_, err = s.js.Publish(s.ctx, ref.deadSubject(), b, jetstream.WithMsgID(id))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeadShareSlowPurge: a purge of alice's oldest dead letters that
// takes long (held here) delays neither alice's next dead letter nor
// bob's, and the tally stays right: once everything is stored, alice's
// tally is what a fresh read of her dead letters counts, and she holds
// at most her share. Before, her tally's lock was held across the purge
// and the publish: her second dead letter waited for the first's purge
// (here until the test gave up, 3 s).
func TestDeadShareSlowPurge(t *testing.T) {
	const maxBytes = 64 << 10
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, st := deadStage(t, ctx, maxBytes)
	deadOf(t, s, "carol", 0, 32, 1000, false) // the stream over half full
	deadOf(t, s, "alice", 0, 7, 1000, false)  // under her share (8 KiB)
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.beforePurge = func(_ context.Context, principal string) {
		once.Do(func() { close(held); <-release })
	}
	first := make(chan error, 1)
	go func() {
		ref := configRef{"alice", "task", "c"}
		first <- s.storeDead("alice", ref.deadSubject(), ref.tokens()+":first", bytes.Repeat([]byte("y"), 3000))
	}()
	select {
	case <-held:
	case err := <-first:
		t.Fatalf("premise: alice's dead letter over her share purged nothing (%v)", err)
	}
	others := make(chan error, 2)
	go func() {
		ref := configRef{"alice", "task", "c"}
		others <- s.storeDead("alice", ref.deadSubject(), ref.tokens()+":second", []byte("z"))
	}()
	go func() {
		ref := configRef{"bob", "task", "c"}
		others <- s.storeDead("bob", ref.deadSubject(), ref.tokens()+":1", []byte("b"))
	}()
	for range 2 {
		select {
		case err := <-others:
			if err != nil {
				t.Errorf("a dead letter stored while alice's purge runs: %v", err)
			}
		case <-time.After(3 * time.Second):
			t.Errorf("a dead letter waited 3 s for alice's purge")
		}
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range len(others) {
		<-others
	}
	deadOf(t, s, "alice", 100, 6, 1000, true)

	tally := s.shares.get("alice")
	tally.mu.Lock()
	got, n := tally.bytes, len(tally.letters)
	tally.mu.Unlock()
	var fresh deadTally
	if err := fresh.readFrom(ctx, st, deadFilter("alice")); err != nil {
		t.Fatal(err)
	}
	if got != fresh.bytes || n != len(fresh.letters) {
		t.Errorf("alice's tally: %d bytes in %d letters; a fresh read: %d in %d", got, n, fresh.bytes, len(fresh.letters))
	}
	share := int64(float64(maxBytes) * DefaultDeadShare)
	if fresh.bytes > share {
		t.Errorf("alice holds %d bytes, over her share %d", fresh.bytes, share)
	}
}

// TestDeadShareConcurrentTally: 16 of alice's lanes dead-letter at once
// (6 letters each, 700 bytes) on a stream over half full: her tally ends
// as a fresh read of her dead letters counts them, nothing pending, and
// she holds at most her share.
func TestDeadShareConcurrentTally(t *testing.T) {
	const maxBytes = 64 << 10
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, st := deadStage(t, ctx, maxBytes)
	deadOf(t, s, "carol", 0, 32, 1000, false)
	var wg sync.WaitGroup
	errs := make(chan error, 16*6)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 6 {
				ref := configRef{"alice", fmt.Sprint("task", w), "c"}
				errs <- s.storeDead("alice", ref.deadSubject(), fmt.Sprintf("%s:%d", ref.tokens(), i), bytes.Repeat([]byte("x"), 700))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	tally := s.shares.get("alice")
	tally.mu.Lock()
	got, n, pending := tally.bytes, len(tally.letters), tally.pending
	tally.mu.Unlock()
	var fresh deadTally
	if err := fresh.readFrom(ctx, st, deadFilter("alice")); err != nil {
		t.Fatal(err)
	}
	if got != fresh.bytes || n != len(fresh.letters) || pending != 0 {
		t.Errorf("alice's tally: %d bytes in %d letters, %d pending; a fresh read: %d in %d", got, n, pending, fresh.bytes, len(fresh.letters))
	}
	if share := int64(float64(maxBytes) * DefaultDeadShare); fresh.bytes > share || len(fresh.letters) == 0 {
		t.Errorf("alice holds %d bytes in %d letters, want some and at most her share %d", fresh.bytes, len(fresh.letters), share)
	}
}

// TestDeadTallyNoneDeliveredIsAnError: a read of a principal's letters
// whose pull ends with none delivered though the stream's info counted
// some (on a cluster a new consumer's first pull can go unanswered) is an
// error, so the store is asked again, not an empty tally kept as read
// that would let the principal past its share; a read that delivers
// letters ends with them.
func TestDeadTallyNoneDeliveredIsAnError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, st := deadStage(t, ctx, 64<<10)
	deadOf(t, s, "alice", 0, 2, 100, false)
	// The info counted 2 of alice's; the pull asks for bob's, of which
	// there are none: none delivered.
	var tally deadTally
	err := tally.readLetters(ctx, st, deadFilter("bob"), 2)
	if !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("none delivered of 2 counted: %v, want an error wrapping nats.ErrTimeout", err)
	}
	if err := tally.readLetters(ctx, st, deadFilter("alice"), 2); err != nil || len(tally.letters) != 2 {
		t.Errorf("alice's letters: %v, %d read; want no error and the 2", err, len(tally.letters))
	}
}
