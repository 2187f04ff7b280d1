package natstest

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// WaitArchived waits until the archive (package archive)'s last batch ends at E2A_AUDIT
// sequence last.
func WaitArchived(t testing.TB, nc *nats.Conn, last uint64) {
	t.Helper()
	r, err := archive.NewReader(nc)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the archive reached E2A_AUDIT's last message", func() bool {
		sp, err := r.Span(context.Background())
		return err == nil && !sp.Empty && sp.Last >= last
	})
}

// RunArchiver runs an archiver (package archive) on nc until the test ends (or stop is
// called), failing the test when it returns an error.
func RunArchiver(t testing.TB, nc *nats.Conn, opts ...archive.Option) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := archive.Run(ctx, nc, opts...); err != nil {
			t.Errorf("archive.Run: %v", err)
		}
	}()
	stop = func() {
		cancel()
		testkit.Receive(t, done, 10*time.Second, "archiver stopped")
	}
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			stop()
		}
	})
	return stop
}

// StoreArchiveBatch stores a batch of the test's making on E2A_ARCHIVE's
// subject (as the admin user: no archiver writes such a thing: corrupt
// payloads, headers that disagree), with headers h, and returns its
// stream sequence.
func StoreArchiveBatch(t testing.TB, js jetstream.JetStream, h map[string]string, data []byte) uint64 {
	t.Helper()
	m := nats.NewMsg(subjects.ArchiveBatches)
	m.Data = data
	for _, k := range slices.Sorted(maps.Keys(h)) {
		m.Header.Set(k, h[k])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}
