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
	"github.com/e2a-pipeline/pipeline/streams"
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

// AuditedMsgs returns how many messages E2A_AUDIT copies of what the hot
// streams hold now: every request and every frame message (e2a.resp.*),
// but no lease (e2a.resp.<id>.lease, outside the audit's source filter).
// A worker stores a lease before its first frame when the request may have
// been delivered before (agent/handle.go, resume), as a test's first
// requests are when they are accepted before the pool's consumer exists:
// a wait for E2A_AUDIT to hold E2A_REQUESTS and E2A_RESPONSES whole never
// ends then (CI: "402 of 403").
func AuditedMsgs(t testing.TB, js jetstream.JetStream) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	count := func(name, filter string) uint64 {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		var n uint64
		for _, c := range info.State.Subjects {
			n += c
		}
		return n
	}
	return count(streams.RequestsStream, subjects.RequestSubjects) + count(streams.ResponsesStream, subjects.AllResponseFrames)
}
