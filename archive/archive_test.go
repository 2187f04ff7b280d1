package archive_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

var fast = []archive.Option{archive.WithFlushInterval(20 * time.Millisecond), archive.WithBatchBytes(8 << 10)}

// checkContiguous checks that the batches hold E2A_AUDIT's sequences
// first..last, each once, in order.
func checkContiguous(t *testing.T, bs []*archive.Batch, first, last uint64) {
	t.Helper()
	next := first
	for _, b := range bs {
		if b.First != next {
			t.Fatalf("batch %d starts at %d, want %d", b.Seq, b.First, next)
		}
		for _, r := range b.Records {
			if r.Seq != next {
				t.Fatalf("batch %d holds %d, want %d", b.Seq, r.Seq, next)
			}
			next++
		}
		if b.Last != next-1 || b.Count != len(b.Records) {
			t.Fatalf("batch %d headers %d..%d (%d), records end at %d (%d)", b.Seq, b.First, b.Last, b.Count, next-1, len(b.Records))
		}
	}
	if next != last+1 {
		t.Fatalf("the archive ends at %d, E2A_AUDIT at %d", next-1, last)
	}
}

// Every E2A_AUDIT message is archived once, byte for byte (subject,
// headers, payload, sequence, store time), in batches that split at the
// batch size; the metrics count them.
func TestArchiveEveryAuditMessage(t *testing.T) {
	t.Parallel()
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	traffic(t, nc, js, "a", 60)
	last := auditLast(t, js, 180)
	reg := prometheus.NewRegistry()
	natstest.RunArchiver(t, nc, append(fast, archive.WithRegisterer(reg))...)
	natstest.WaitArchived(t, nc, last)
	bs := batches(t, nc)
	checkContiguous(t, bs, 1, last)
	if len(bs) < 3 {
		t.Errorf("%d batches for %d messages of 8 KiB batches", len(bs), last)
	}
	want := map[uint64]*jetstream.RawStreamMsg{}
	natstest.EachMessage(t, js, streams.AuditStream, func(m *jetstream.RawStreamMsg) { want[m.Sequence] = m })
	for _, b := range bs {
		for _, r := range b.Records {
			m := want[r.Seq]
			if m == nil || r.Subject != m.Subject || !bytes.Equal(r.Data, m.Data) || !r.Time.Equal(m.Time) ||
				r.Header.Get(subjects.HeaderStreamSource) != m.Header.Get(subjects.HeaderStreamSource) ||
				r.Header.Get(subjects.HeaderRequestID) != m.Header.Get(subjects.HeaderRequestID) {
				t.Fatalf("record %d differs from E2A_AUDIT's message: %+v", r.Seq, r)
			}
		}
	}
	// A batch is counted once its store is acknowledged, a moment after it
	// can be read.
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("e2a_archive_records_total at %d", last), func() bool {
		return metricValue(t, reg, "e2a_archive_records_total") == float64(last)
	})
	in, out := metricValue(t, reg, "e2a_archive_bytes_in_total"), metricValue(t, reg, "e2a_archive_bytes_out_total")
	if out <= 0 || out >= in/2 {
		t.Errorf("bytes in %v, out %v: want at least 2x compression of the test's repetitive frames", in, out)
	}
}

// metricValue returns the value of the counter or gauge name registered
// on reg (0 before it is).
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) == 1 {
			if g := mf.Metric[0].GetGauge(); g != nil {
				return g.GetValue()
			}
			return mf.Metric[0].GetCounter().GetValue()
		}
	}
	return 0
}

// The archiver keeps no state: stopped and started again (or another
// process started), it goes on after the archive's last batch.
func TestArchiveResumesAfterItsLastBatch(t *testing.T) {
	t.Parallel()
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	traffic(t, nc, js, "r1", 20)
	last := auditLast(t, js, 60)
	stop := natstest.RunArchiver(t, nc, fast...)
	natstest.WaitArchived(t, nc, last)
	stop()
	traffic(t, nc, js, "r2", 20)
	last = auditLast(t, js, 120)
	natstest.RunArchiver(t, nc, fast...)
	natstest.WaitArchived(t, nc, last)
	checkContiguous(t, batches(t, nc), 1, last)
}

// Two archivers at once (a rolling update, two replicas) store every
// message once: each batch is stored with the subject's expected last
// sequence, and the refused archiver reads the archive again.
func TestTwoArchiversStoreEachMessageOnce(t *testing.T) {
	t.Parallel()
	srv, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	reg := prometheus.NewRegistry()
	runArchivers(t, srv, 2, reg)
	traffic(t, nc, js, "two", 80)
	last := auditLast(t, js, 240)
	natstest.WaitArchived(t, nc, last)
	checkContiguous(t, batches(t, nc), 1, last)
	t.Logf("conflicts: %v", metricValue(t, reg, "e2a_archive_conflicts_total"))
}

// Messages E2A_AUDIT dropped (its byte limit) while no archiver ran are
// counted as missed, once, by the archiver that stores the batch after
// them (two run here); what E2A_AUDIT dropped before the archive of it
// began is not. The archive goes on from E2A_AUDIT's first message.
func TestArchiveCountsWhatE2AAuditDroppedUnarchived(t *testing.T) {
	t.Parallel()
	cfg := natstest.Config()
	cfg.AuditMaxBytes = 64 << 10
	srv, nc := natstest.RunServer(t, natstest.WithConfig(cfg))
	js := natstest.JetStream(t, nc)
	traffic(t, nc, js, "before", 150) // dropped before any archive: not missed
	auditLastAtLeast(t, js, 450)
	reg := prometheus.NewRegistry()
	stop := natstest.RunArchiver(t, nc, append(fast, archive.WithRegisterer(reg))...)
	natstest.WaitArchived(t, nc, auditState(t, js).LastSeq)
	stop()
	archived := auditState(t, js).LastSeq
	traffic(t, nc, js, "while", 150) // E2A_AUDIT drops some of what the archive has not read
	auditLastAtLeast(t, js, archived+450)
	st := auditState(t, js)
	if st.FirstSeq <= archived+1 {
		t.Fatalf("E2A_AUDIT dropped nothing unarchived (first %d, archived to %d)", st.FirstSeq, archived)
	}
	runArchivers(t, srv, 2, reg)
	natstest.WaitArchived(t, nc, st.LastSeq)
	bs := batches(t, nc)
	if n := metricValue(t, reg, "e2a_archive_missed_total"); n != float64(st.FirstSeq-archived-1) {
		t.Errorf("missed %v, want %d (E2A_AUDIT %d.., archived to %d)", n, st.FirstSeq-archived-1, st.FirstSeq, archived)
	}
	var resumed []*archive.Batch
	for _, b := range bs {
		if b.First > archived {
			resumed = append(resumed, b)
		}
	}
	checkContiguous(t, resumed, st.FirstSeq, st.LastSeq)
}

// auditState returns E2A_AUDIT's state.
func auditState(t *testing.T, js jetstream.JetStream) jetstream.StreamState {
	t.Helper()
	return auditInfo(t, js).State
}

// auditInfo returns E2A_AUDIT's info.
func auditInfo(t *testing.T, js jetstream.JetStream) *jetstream.StreamInfo {
	t.Helper()
	st, err := js.Stream(context.Background(), streams.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo()
}

// A message too large for any batch under max_payload (incompressible,
// near the limit) is left in E2A_AUDIT and counted as skipped, not as
// missed; the archive goes on after it.
func TestArchiveSkipsWhatNoBatchHolds(t *testing.T) {
	t.Parallel()
	_, nc := natstest.RunServer(t, natstest.WithMaxPayload(64<<10))
	js := natstest.JetStream(t, nc)
	reg := prometheus.NewRegistry()
	natstest.RunArchiver(t, nc, append(fast, archive.WithRegisterer(reg))...)
	big := make([]byte, 64<<10-400) // incompressible: random
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.Publish(ctx, "e2a.req.p.big-1", big); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "e2a.req.p.small-1", []byte(`{"request_id":"small-1"}`)); err != nil {
		t.Fatal(err)
	}
	auditLastAtLeast(t, js, 2)
	natstest.WaitArchived(t, nc, 2)
	bs := batches(t, nc)
	var seqs []uint64
	for _, b := range bs {
		for _, r := range b.Records {
			seqs = append(seqs, r.Seq)
		}
	}
	if !slices.Equal(seqs, []uint64{2}) {
		t.Fatalf("archived %v, want E2A_AUDIT's message 2 only", seqs)
	}
	skipped, missed := metricValue(t, reg, "e2a_archive_skipped_total"), metricValue(t, reg, "e2a_archive_missed_total")
	if skipped != 1 || missed != 0 {
		t.Errorf("skipped %v, missed %v; want 1 and 0", skipped, missed)
	}
}

// E2A_AUDIT deleted and applied again (how AuditPartitions changes)
// starts its sequences again: the archiver archives the new stream from
// its first message in a new epoch, and a Reader's span is the new
// epoch's.
func TestArchiveFollowsANewE2AAudit(t *testing.T) {
	t.Parallel()
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	natstest.RunArchiver(t, nc, fast...)
	traffic(t, nc, js, "old", 20)
	natstest.WaitArchived(t, nc, auditLast(t, js, 60))
	ctx := context.Background()
	if err := js.DeleteStream(ctx, streams.AuditStream); err != nil {
		t.Fatal(err)
	}
	if rep, err := streams.Apply(ctx, js, natstest.Config()); err != nil {
		t.Fatalf("apply: %v\n%s", err, rep)
	}
	natstest.Purge(t, js, streams.RequestsStream, streams.ResponsesStream) // the new audit copies what follows
	traffic(t, nc, js, "new", 5)
	last := auditLast(t, js, 15)
	r, err := archive.NewReader(nc)
	if err != nil {
		t.Fatal(err)
	}
	var sp archive.Span
	testkit.Eventually(t, 20*time.Second, "the new E2A_AUDIT archived", func() bool {
		sp, err = r.Span(ctx)
		return err == nil && sp.Last == last && sp.First == 1
	})
	var got []uint64
	for rec, err := range r.Records(ctx, sp, 1) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rec.Seq)
		if !strings.Contains(rec.Header.Get(subjects.HeaderRequestID), "new-") {
			t.Fatalf("record %d of the new epoch is %s's", rec.Seq, rec.Header.Get(subjects.HeaderRequestID))
		}
	}
	if uint64(len(got)) != last {
		t.Errorf("the new epoch's records %v, want 1..%d", got, last)
	}
}

// A batch that is not one the archiver wrote is refused with ErrCorrupt by
// the reader, never a panic: headers that parse over a payload that is not
// zstd, headers that do not parse, and a sound batch whose header counts
// more messages than it holds.
func TestReaderRefusesCorruptBatches(t *testing.T) {
	t.Parallel()
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	now := time.Now().Format(time.RFC3339Nano)
	sound := map[string]string{subjects.HeaderArchiveFirst: "1", subjects.HeaderArchiveLast: "2", subjects.HeaderArchiveCount: "2",
		subjects.HeaderArchiveFrom: now, subjects.HeaderArchiveUntil: now, subjects.HeaderArchiveEpoch: now}
	oneRecord, err := archive.Encode([]archive.Record{{Seq: 1, Subject: "e2a.audit.req.1", Data: []byte("{}")}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := archive.NewReader(nc)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		h    map[string]string
		data []byte
	}{
		{sound, []byte("not zstd")},
		{map[string]string{subjects.HeaderArchiveFirst: "x"}, oneRecord},
		{sound, oneRecord}, // counts 2, holds 1
	} {
		seq := natstest.StoreArchiveBatch(t, js, c.h, c.data)
		if _, err := r.Load(context.Background(), seq); !errors.Is(err, archive.ErrCorrupt) {
			t.Errorf("batch %d: %v, want ErrCorrupt", i, err)
		}
	}
}
