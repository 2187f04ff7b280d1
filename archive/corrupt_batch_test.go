package archive_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// readAll reads the archive's span from its first message, returning the
// sequences read and the unreadable ranges reported; any other error
// fails the test.
func readAll(t *testing.T, nc *nats.Conn) ([]uint64, []*archive.UnreadableError) {
	t.Helper()
	r, sp := openSpan(t, nc)
	ctx := context.Background()
	var seqs []uint64
	var bad []*archive.UnreadableError
	for rec, err := range r.Records(ctx, sp, sp.First) {
		var ue *archive.UnreadableError
		if errors.As(err, &ue) {
			bad = append(bad, ue)
			continue
		}
		if err != nil {
			t.Fatalf("records after %v: %v", seqs, err)
		}
		seqs = append(seqs, rec.Seq)
	}
	return seqs, bad
}

// seqRange returns first..last.
func seqRange(first, last uint64) []uint64 {
	var out []uint64
	for s := first; s <= last; s++ {
		out = append(out, s)
	}
	return out
}

// A corrupt last batch (its headers do not parse: no archiver can tell
// where the archive ends from it) stalled every archiver for good: each
// session failed reading it, retried, failed again, while E2A_AUDIT went
// on dropping what was never archived. The archiver now writes past it:
// it goes on after the newest sound batch, fenced on the corrupt one, so
// that what the corrupt batch may have held is archived again from
// E2A_AUDIT; it counts the batch (e2a_archive_corrupt_batches_total) and
// every message reads once, with nothing reported unreadable.
func TestArchiverWritesPastACorruptLastBatch(t *testing.T) {
	t.Parallel()
	srv, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	stop := natstest.RunArchiver(t, nc, fast...)
	traffic(t, nc, js, "before", 10)
	natstest.WaitArchived(t, nc, auditLast(t, js, 30))
	stop()
	natstest.StoreArchiveBatch(t, js, map[string]string{subjects.HeaderArchiveFirst: "x"}, []byte("not zstd"))
	traffic(t, nc, js, "after", 10)
	last := auditLast(t, js, 60)
	reg := prometheus.NewRegistry()
	runArchivers(t, srv, 2, reg) // both find the corrupt batch; one batch is stored after it
	natstest.WaitArchived(t, nc, last)
	seqs, bad := readAll(t, nc)
	if !slices.Equal(seqs, seqRange(1, last)) || len(bad) != 0 {
		t.Errorf("read %v (unreadable %v), want 1..%d once each", seqs, bad, last)
	}
	if n := metricValue(t, reg, "e2a_archive_corrupt_batches_total"); n < 1 {
		t.Errorf("e2a_archive_corrupt_batches_total %v, want the corrupt batch counted", n)
	}
}

// A batch inside the archive that does not read (its headers are sound, its
// payload is not) ended every read of the archive that reached it: the
// messages after it were unreadable too. Records now reports the
// sequences only it holds, naming the batch (an UnreadableError wrapping
// ErrCorrupt), and goes on with the batches after it.
func TestRecordsReadAroundACorruptBatch(t *testing.T) {
	t.Parallel()
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	stop := natstest.RunArchiver(t, nc, fast...)
	traffic(t, nc, js, "a", 5)
	a := auditLast(t, js, 15)
	natstest.WaitArchived(t, nc, a)
	stop()
	traffic(t, nc, js, "b", 5)
	b := auditLast(t, js, 30)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	bad := natstest.StoreArchiveBatch(t, js, map[string]string{
		subjects.HeaderArchiveFirst: strconv.FormatUint(a+1, 10), subjects.HeaderArchiveLast: strconv.FormatUint(b, 10),
		subjects.HeaderArchiveCount: strconv.FormatUint(b-a, 10), subjects.HeaderArchiveFrom: now, subjects.HeaderArchiveUntil: now,
		subjects.HeaderArchiveEpoch: auditInfo(t, js).Created.UTC().Format(time.RFC3339Nano),
	}, []byte("not zstd"))
	natstest.RunArchiver(t, nc, fast...)
	traffic(t, nc, js, "c", 5)
	c := auditLast(t, js, 45)
	natstest.WaitArchived(t, nc, c)
	seqs, unreadable := readAll(t, nc)
	if want := append(seqRange(1, a), seqRange(b+1, c)...); !slices.Equal(seqs, want) {
		t.Errorf("read %v, want %v", seqs, want)
	}
	if len(unreadable) != 1 {
		t.Fatalf("unreadable %v, want batch %d's %d..%d", unreadable, bad, a+1, b)
	}
	u := unreadable[0]
	if u.Batch != bad || u.First != a+1 || u.Last != b || !errors.Is(u, archive.ErrCorrupt) ||
		!strings.Contains(u.Error(), "batch "+strconv.FormatUint(bad, 10)) {
		t.Errorf("unreadable %+v (%v), want batch %d's %d..%d, ErrCorrupt", u, u, bad, a+1, b)
	}
}

// An archiver that fails without progress (here E2A_ARCHIVE is missing)
// retried for ever with a warning in its log and no other sign: no series
// an alert could fire on, /readyz of `e2a archive` ready. It now reports
// the stall: Health.Check names it, and e2a_archive_stalled_seconds says
// how long it has lasted; both clear once the archiver stores again.
func TestArchiverReportsAStall(t *testing.T) {
	t.Parallel()
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	ctx := context.Background()
	if err := js.DeleteStream(ctx, streams.ArchiveStream); err != nil {
		t.Fatal(err)
	}
	h := archive.NewHealth()
	reg := prometheus.NewRegistry()
	natstest.RunArchiver(t, nc, append(fast, archive.WithRegisterer(reg), archive.WithHealth(h), archive.WithStallAfter(100*time.Millisecond))...)
	testkit.Eventually(t, 10*time.Second, "the stall reported", func() bool {
		err := h.Check(ctx)
		return err != nil && strings.Contains(err.Error(), "stalled") && metricValue(t, reg, "e2a_archive_stalled_seconds") > 0
	})
	if rep, err := streams.Apply(ctx, js, natstest.Config()); err != nil {
		t.Fatalf("apply: %v\n%s", err, rep)
	}
	traffic(t, nc, js, "back", 2)
	natstest.WaitArchived(t, nc, auditLast(t, js, 6))
	testkit.Eventually(t, 10*time.Second, "the stall cleared", func() bool {
		return h.Check(ctx) == nil && metricValue(t, reg, "e2a_archive_stalled_seconds") == 0
	})
}
