package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// archivedHistory stores old requests, archives them, pushes them out of
// E2A_AUDIT (its byte limit) with later traffic and out of the hot
// streams (a purge, as their max age would), so that only the archive
// holds them. It returns the old requests' ids and when they were stored.
func archivedHistory(t *testing.T, withArchiver bool) (*nats.Conn, []string, time.Time, time.Time) {
	t.Helper()
	cfg := natstest.Config()
	cfg.AuditMaxBytes = 96 << 10
	_, nc := natstest.RunServer(t, natstest.WithConfig(cfg))
	js := natstest.JetStream(t, nc)
	if withArchiver {
		natstest.RunArchiver(t, nc, archive.WithFlushInterval(20*time.Millisecond), archive.WithBatchBytes(8<<10))
	}
	since := time.Now()
	var old []string
	for i := range 8 {
		id := uuid.Must(uuid.NewV7()).String()
		if i%4 == 3 {
			id = "client-chosen-" + id[len(id)-12:] // no time in the id
		}
		old = append(old, id)
		completeRequest(t, js, "demo", &e2a.Envelope{RequestID: id, Method: "chat"}, 3)
	}
	waitAudit(t, js, 40)
	until := time.Now() // after E2A_AUDIT's copies, whose times the scan reads
	oldLast := auditState(t, js).LastSeq
	if withArchiver {
		natstest.WaitArchived(t, nc, oldLast)
	}
	for i := 0; auditState(t, js).FirstSeq <= oldLast; i++ {
		if i > 2000 {
			t.Fatal("E2A_AUDIT never dropped the old requests")
		}
		completeRequest(t, js, "demo", &e2a.Envelope{RequestID: uuid.Must(uuid.NewV7()).String(), Method: "chat"}, 3)
	}
	natstest.Purge(t, js, streams.RequestsStream, streams.ResponsesStream)
	return nc, old, since, until
}

func auditState(t *testing.T, js jetstream.JetStream) jetstream.StreamState {
	t.Helper()
	s, err := js.Stream(testCtx(t), streams.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State
}

// A request E2A_AUDIT and the hot streams no longer hold is replayed from
// the archive, by id (a UUIDv7, found from its time, or a client's own id)
// and by a scan of its time range, complete and checked as before.
func TestReplayFromTheArchive(t *testing.T) {
	t.Parallel()
	nc, old, since, until := archivedHistory(t, true)
	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []audit.Source{audit.SourceAuto, audit.SourceAudit} {
		recs, st := collect(t, a, audit.Query{RequestIDs: old, Source: src})
		sums := summaries(recs)
		for _, id := range old {
			s := sums[id]
			if s == nil || s.State != audit.StateComplete || !s.RequestFound || s.Frames != 4 || len(s.Violations) > 0 {
				t.Errorf("%s from %s: %+v", id, src, s)
			}
		}
		if st.Complete != len(old) {
			t.Errorf("%s: %+v", src, st)
		}
	}
	recs, _ := collect(t, a, audit.Query{Since: since, Until: until, NoFrames: true})
	sums := summaries(recs)
	for _, id := range old {
		if s := sums[id]; s == nil || s.State != audit.StateComplete {
			t.Errorf("scan %v..%v: %s: %+v", since, until, id, s)
		}
	}
}

// The same history without an archiver: the old requests are gone (the
// test above would fail without the archive).
func TestReplayWithoutTheArchiveMissesOldRequests(t *testing.T) {
	t.Parallel()
	nc, old, _, _ := archivedHistory(t, false)
	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := collect(t, a, audit.Query{RequestIDs: old})
	for id, s := range summaries(recs) {
		if s.State != audit.StateNotFound {
			t.Errorf("%s: %+v, want not found", id, s)
		}
	}
}

// archivedServer starts a server whose E2A_AUDIT keeps 4 MiB, with an
// archiver; settle waits until the archive holds everything E2A_AUDIT
// does (so that nothing is dropped before it is archived).
func archivedServer(t *testing.T) (jetstream.JetStream, *nats.Conn, func(context.Context)) {
	t.Helper()
	cfg := natstest.Config()
	cfg.AuditMaxBytes = 4 << 20
	_, nc := natstest.RunServer(t, natstest.WithConfig(cfg))
	js := natstest.JetStream(t, nc)
	natstest.RunArchiver(t, nc, archive.WithFlushInterval(20*time.Millisecond))
	settle := func(context.Context) { natstest.WaitArchived(t, nc, auditState(t, js).LastSeq) }
	return js, nc, settle
}

// A replay that began while E2A_AUDIT still held a request reads it from
// the archive when E2A_AUDIT drops it in the meantime (E2A_AUDIT is kept
// at its limit, so its head moves all the time): the archive is read to
// its end as the replay reaches it, then E2A_AUDIT after it.
func TestReplayWhileE2AAuditDropsItsHead(t *testing.T) {
	t.Parallel()
	nc, _, _, _ := archivedHistory(t, true) // the archive starts before E2A_AUDIT
	js := natstest.JetStream(t, nc)
	r, err := archive.NewReader(nc)
	if err != nil {
		t.Fatal(err)
	}
	archived := func(seq uint64) {
		testkit.Eventually(t, 15*time.Second, "the archive caught up", func() bool {
			sp, err := r.Span(context.Background())
			return err == nil && !sp.Empty && sp.Last >= seq
		})
	}
	b := uuid.Must(uuid.NewV7()).String()
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: b, Method: "chat"}, 3)
	testkit.Eventually(t, 15*time.Second, "E2A_AUDIT copied b", func() bool {
		return natstest.StoredWith(t, js, b, streams.AuditStream) >= 5
	})
	bLast := auditState(t, js).LastSeq
	archived(bLast)
	natstest.Purge(t, js, streams.RequestsStream, streams.ResponsesStream)
	if first := auditState(t, js).FirstSeq; first > bLast-4 {
		t.Fatalf("E2A_AUDIT already dropped b (first %d, b ends at %d)", first, bLast)
	}

	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]*audit.Summary{}
	pushed := false
	_, err = a.Replay(testCtx(t), audit.Query{RequestIDs: []string{"client-none", b}}, func(rec audit.Record) error {
		if rec.Kind != audit.KindSummary {
			return nil
		}
		sums[rec.RequestID] = rec.Summary
		if !pushed { // while the replay runs, E2A_AUDIT drops b (archived)
			pushed = true
			for i := 0; auditState(t, js).FirstSeq <= bLast; i++ {
				if i > 2000 {
					t.Fatal("E2A_AUDIT never dropped b")
				}
				completeRequest(t, js, "demo", &e2a.Envelope{RequestID: uuid.Must(uuid.NewV7()).String(), Method: "chat"}, 3)
			}
			archived(auditState(t, js).LastSeq)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := sums[b]; s == nil || s.State != audit.StateComplete {
		t.Errorf("b, archived at E2A_AUDIT ..%d, dropped from E2A_AUDIT during the replay: %+v, want complete", bLast, s)
	}
}
