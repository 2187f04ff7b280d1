package archive_test

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestArchiveKeepsHeadersAndPayloadExactly: a record read back from the archive carries exactly the
// headers and payload the publisher stored (keys in their case, several
// values of one key in order, a binary and an empty payload), plus only the
// Nats-Stream-Source E2A_AUDIT adds.
func TestArchiveKeepsHeadersAndPayloadExactly(t *testing.T) {
	t.Parallel()
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	natstest.RunArchiver(t, nc, fast...)
	ctx := context.Background()
	bin := []byte{0, 0xff, 0xfe, '\r', '\n', 0x80, 'x'}
	type sent struct {
		h    nats.Header
		data []byte
	}
	want := map[string]sent{}
	for i, data := range [][]byte{bin, nil, []byte(`{"request_id":"h-2"}`)} {
		id := "h-" + strconv.Itoa(i)
		m := nats.NewMsg("e2a.req.p." + id)
		m.Header.Set(subjects.HeaderMsgID, id)
		m.Header.Set(subjects.HeaderRequestID, id)
		m.Header["x-lower-case"] = []string{"v " + id}
		m.Header["Multi"] = []string{"1", "2", "1"}
		m.Header.Set(subjects.HeaderTraceparent, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		m.Data = data
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
		want[id] = sent{h: m.Header, data: data}
	}
	last := auditLast(t, js, 3)
	natstest.WaitArchived(t, nc, last)
	n := 0
	for _, b := range batches(t, nc) {
		for _, r := range b.Records {
			id := r.Header.Get(subjects.HeaderRequestID)
			w, ok := want[id]
			if !ok {
				t.Fatalf("record %d of unknown request %q", r.Seq, id)
			}
			n++
			got := maps.Clone(r.Header)
			if src := got[subjects.HeaderStreamSource]; len(src) != 1 {
				t.Errorf("record %d: Nats-Stream-Source %q", r.Seq, src)
			}
			delete(got, subjects.HeaderStreamSource)
			if !maps.EqualFunc(got, w.h, slices.Equal) {
				t.Errorf("record %d headers\n got %v\nwant %v", r.Seq, got, w.h)
			}
			if !bytes.Equal(r.Data, w.data) {
				t.Errorf("record %d payload %q, want %q", r.Seq, r.Data, w.data)
			}
		}
	}
	if n != 3 {
		t.Fatalf("%d records archived, want 3", n)
	}
}

// TestArchiveGoesOnAfterAServerRestart: the archiver keeps no state but the archive's last batch
// and its epoch (E2A_AUDIT's creation time). A graceful restart of the
// server on its store must keep that epoch, so that the archive goes on
// after its last batch instead of archiving E2A_AUDIT again from its first
// message (every message twice).
func TestArchiveGoesOnAfterAServerRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := func() (*streams.Embedded, *nats.Conn, jetstream.JetStream) {
		srv, err := streams.StartEmbedded(streams.EmbeddedOptions{StoreDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		nc, err := srv.Connect()
		if err != nil {
			srv.Shutdown()
			t.Fatal(err)
		}
		return srv, nc, natstest.JetStream(t, nc)
	}
	srv, nc, js := start()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if rep, err := streams.Apply(ctx, js, natstest.Config()); err != nil {
		t.Fatalf("apply: %v\n%s", err, rep)
	}
	traffic(t, nc, js, "before", 10)
	last := auditLast(t, js, 30)
	created := auditInfo(t, js).Created
	stop := natstest.RunArchiver(t, nc, fast...)
	natstest.WaitArchived(t, nc, last)
	stop()
	nc.Close()
	srv.Shutdown()

	srv, nc, js = start()
	t.Cleanup(srv.Shutdown)
	t.Cleanup(nc.Close)
	if c := auditInfo(t, js).Created; !c.Equal(created) {
		t.Errorf("E2A_AUDIT's creation time %v after the restart, %v before: the archiver takes it for a new stream", c, created)
	}
	traffic(t, nc, js, "after", 10)
	last = auditLast(t, js, 60)
	natstest.RunArchiver(t, nc, fast...)
	natstest.WaitArchived(t, nc, last)
	checkContiguous(t, batches(t, nc), 1, last)
}

// TestArchiversStoppedMidBatchLoseNothing: archivers stopped mid-batch (records read, not stored) and
// started again while two run and traffic flows store every E2A_AUDIT
// message once, in order, and count nothing as missed.
func TestArchiversStoppedMidBatchLoseNothing(t *testing.T) {
	t.Parallel()
	srv, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	reg := prometheus.NewRegistry()
	// One archiver that closes its batches slowly (it holds read records
	// when it is stopped), restarted four times; one fast archiver beside it.
	slow := []archive.Option{archive.WithFlushInterval(300 * time.Millisecond), archive.WithBatchBytes(64 << 10), archive.WithRegisterer(reg)}
	runArchivers(t, srv, 1, reg)
	for round := range 4 {
		anc, err := srv.Connect()
		if err != nil {
			t.Fatal(err)
		}
		stop := natstest.RunArchiver(t, anc, slow...)
		traffic(t, nc, js, "mid"+strconv.Itoa(round), 15)
		stop()
		anc.Close()
	}
	last := auditLast(t, js, 4*15*3)
	natstest.WaitArchived(t, nc, last)
	checkContiguous(t, batches(t, nc), 1, last)
	if n := metricValue(t, reg, "e2a_archive_missed_total"); n != 0 {
		t.Errorf("missed %v, want 0", n)
	}
}

// TestReaderRecordsFromAnySequence: the archiver's batches, read back by sequence with
// Reader.Records from any sequence, give each E2A_AUDIT message once, in
// order, and SeqAtTime finds the first message stored at or after a time.
func TestReaderRecordsFromAnySequence(t *testing.T) {
	t.Parallel()
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	natstest.RunArchiver(t, nc, fast...)
	traffic(t, nc, js, "rd", 40)
	last := auditLast(t, js, 120)
	natstest.WaitArchived(t, nc, last)
	want := map[uint64]time.Time{}
	natstest.EachMessage(t, js, streams.AuditStream, func(m *jetstream.RawStreamMsg) { want[m.Sequence] = m.Time })
	r, err := archive.NewReader(nc, archive.WithCacheBatches(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sp, err := r.Span(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []uint64{1, 2, 37, 60, last - 1, last, last + 1} {
		next := from
		for rec, err := range r.Records(ctx, sp, from) {
			if err != nil {
				t.Fatal(err)
			}
			if rec.Seq != next {
				t.Fatalf("from %d: record %d, want %d", from, rec.Seq, next)
			}
			next++
		}
		if from <= last && next != last+1 {
			t.Errorf("from %d: records end at %d, want %d", from, next-1, last)
		}
		if from <= last {
			seq, err := r.SeqAtTime(ctx, sp, want[from])
			if err != nil || want[seq] != want[from] || seq > from {
				t.Errorf("SeqAtTime(time of %d) = %d, %v", from, seq, err)
			}
		}
	}
	if sp.First != 1 || sp.Last != last {
		t.Errorf("span %d..%d, want 1..%d", sp.First, sp.Last, last)
	}
}
