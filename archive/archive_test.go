package archive_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
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
	startArchiver(t, nc, append(fast, archive.WithRegisterer(reg))...)
	waitArchived(t, nc, last)
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
	if n := testutil.ToFloat64(metric(t, reg, "e2a_archive_records_total")); n != float64(last) {
		t.Errorf("records metric %v, want %d", n, last)
	}
	in, out := testutil.ToFloat64(metric(t, reg, "e2a_archive_bytes_in_total")), testutil.ToFloat64(metric(t, reg, "e2a_archive_bytes_out_total"))
	if out <= 0 || out >= in/2 {
		t.Errorf("bytes in %v, out %v: want at least 2x compression of the test's repetitive frames", in, out)
	}
}

// metric returns the collector named name registered on reg.
func metric(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	return &gathered{reg: reg, name: name}
}

// gathered collects the metric name from a registry (for testutil).
type gathered struct {
	reg  *prometheus.Registry
	name string
}

func (g *gathered) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(g, ch) }
func (g *gathered) Collect(ch chan<- prometheus.Metric) {
	ch2 := make(chan prometheus.Metric, 64)
	go func() { g.reg.Collect(ch2); close(ch2) }()
	for m := range ch2 {
		if bytes.Contains([]byte(m.Desc().String()), []byte(`"`+g.name+`"`)) {
			ch <- m
		}
	}
}

// The archiver keeps no state: stopped and started again (or another
// process started), it goes on after the archive's last batch.
func TestArchiveResumesAfterItsLastBatch(t *testing.T) {
	t.Parallel()
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	traffic(t, nc, js, "r1", 20)
	last := auditLast(t, js, 60)
	stop := startArchiver(t, nc, fast...)
	waitArchived(t, nc, last)
	stop()
	traffic(t, nc, js, "r2", 20)
	last = auditLast(t, js, 120)
	startArchiver(t, nc, fast...)
	waitArchived(t, nc, last)
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
	for range 2 {
		anc, err := srv.Connect()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(anc.Close)
		startArchiver(t, anc, append(fast, archive.WithRegisterer(reg))...)
	}
	traffic(t, nc, js, "two", 80)
	last := auditLast(t, js, 240)
	waitArchived(t, nc, last)
	checkContiguous(t, batches(t, nc), 1, last)
	t.Logf("conflicts: %v", testutil.ToFloat64(metric(t, reg, "e2a_archive_conflicts_total")))
}

// Messages E2A_AUDIT dropped (its byte limit) before the archiver read them
// are counted as missed; the archive starts at E2A_AUDIT's first message.
func TestArchiveCountsMessagesDroppedBeforeArchiving(t *testing.T) {
	t.Parallel()
	cfg := natstest.Config()
	cfg.AuditMaxBytes = 64 << 10
	_, nc := natstest.RunServer(t, natstest.WithConfig(cfg))
	js := natstest.JetStream(t, nc)
	traffic(t, nc, js, "m", 150)
	auditLastAtLeast(t, js, 450)
	st, err := js.Stream(context.Background(), streams.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	first := st.CachedInfo().State.FirstSeq
	if first <= 1 {
		t.Fatalf("E2A_AUDIT dropped nothing (first %d)", first)
	}
	last := st.CachedInfo().State.LastSeq
	reg := prometheus.NewRegistry()
	startArchiver(t, nc, append(fast, archive.WithRegisterer(reg))...)
	waitArchived(t, nc, last)
	checkContiguous(t, batches(t, nc), first, last)
	if n := testutil.ToFloat64(metric(t, reg, "e2a_archive_missed_total")); n != float64(first-1) {
		t.Errorf("missed %v, want %d", n, first-1)
	}
}

// A batch that is not one the archiver wrote is refused with ErrCorrupt by
// the reader, never a panic.
func TestReaderRefusesCorruptBatches(t *testing.T) {
	t.Parallel()
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	for i, h := range []map[string]string{
		{subjects.HeaderArchiveFirst: "1", subjects.HeaderArchiveLast: "2", subjects.HeaderArchiveCount: "2",
			subjects.HeaderArchiveFrom: time.Now().Format(time.RFC3339Nano), subjects.HeaderArchiveUntil: time.Now().Format(time.RFC3339Nano)},
		{subjects.HeaderArchiveFirst: "x"},
	} {
		m := nats.NewMsg(subjects.ArchiveBatches)
		m.Data = []byte("not zstd")
		for _, k := range slices.Sorted(maps.Keys(h)) {
			m.Header.Set(k, h[k])
		}
		ack, err := js.PublishMsg(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := archive.NewReader(nc)
		if _, err := r.Load(context.Background(), ack.Sequence); !errors.Is(err, archive.ErrCorrupt) {
			t.Errorf("batch %d: %v, want ErrCorrupt", i, err)
		}
	}
}
