package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// purgeBelow drops the messages of stream name below sequence seq, as
// its max age drops the oldest first.
func purgeBelow(t *testing.T, js jetstream.JetStream, name string, seq uint64) {
	t.Helper()
	s, err := js.Stream(testCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(testCtx(t), jetstream.WithPurgeSequence(seq)); err != nil {
		t.Fatal(err)
	}
}

// frameSeqs returns the sequences of id's frame records, in output order.
func frameSeqs(recs []audit.Record, id string) []int64 {
	var out []int64
	for _, r := range recs {
		if r.Kind == audit.KindFrame && r.RequestID == id && r.Sequence != nil {
			out = append(out, *r.Sequence)
		}
	}
	return out
}

// Requests whose ids need encoding (dots,
// unicode, over 64 bytes) and a UUIDv7, with their envelopes and first
// frames aged out of the hot streams and their last frames still there, are
// replayed by id (SourceAuto) and by a scan of their task with every frame
// once, in order; the read API's history gives the UUIDv7 whole.
func TestReplayEncodedIDsAcrossTheHotBoundary(t *testing.T) {
	js, nc := server(t)
	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"a.b.c", "ünï cödé *>", strings.Repeat("long-id.", 12), uuid.Must(uuid.NewV7()).String()}
	for _, id := range ids {
		natstest.PublishRequest(t, js, "demo", &e2a.Envelope{RequestID: id, TaskID: "task-enc"})
	}
	var cut uint64
	for seq := int64(0); seq < 4; seq++ {
		for _, id := range ids {
			publishFrame(t, js, id, seq, frame(id, seq, seq == 3))
		}
		if seq == 1 {
			s, err := js.Stream(testCtx(t), streams.ResponsesStream)
			if err != nil {
				t.Fatal(err)
			}
			cut = s.CachedInfo().State.LastSeq + 1
		}
	}
	waitAudit(t, js, uint64(len(ids)*5))
	natstest.Purge(t, js, streams.RequestsStream)
	purgeBelow(t, js, streams.ResponsesStream, cut)
	for _, q := range []audit.Query{{RequestIDs: ids}, {TaskID: "task-enc"}} {
		recs, _ := collect(t, a, q)
		sums := summaries(recs)
		for _, id := range ids {
			seqs := frameSeqs(recs, id)
			if s := sums[id]; s == nil || s.State != audit.StateComplete || !s.OK() || len(seqs) != 4 || seqs[0] != 0 || seqs[3] != 3 {
				t.Errorf("%+v: %q frames %v summary %+v", q, id, seqs, s)
			}
		}
	}
	h, err := a.Request(testCtx(t), ids[3])
	if err != nil || len(h.Frames) != 4 {
		t.Fatalf("history of %s: %d frames, %v", ids[3], len(h.Frames), err)
	}
}

// The archive is read for what E2A_AUDIT drops during a replay even when
// E2A_AUDIT still held its whole history when the replay began (it had not
// reached its limit; the archive held the same): a request dropped then
// (archived first) is found by id. It was not found: the archive was read
// only when it started earlier than E2A_AUDIT at the replay's start
// (TestReplayWhileE2AAuditDropsItsHead is that case).
func TestReplayE2AAuditDropsItsFirstHeadDuringReplay(t *testing.T) {
	cfg := natstest.Config()
	cfg.AuditMaxBytes = 96 << 10
	_, nc := natstest.RunServer(t, natstest.WithConfig(cfg))
	js := natstest.JetStream(t, nc)
	natstest.RunArchiver(t, nc, archive.WithFlushInterval(20*time.Millisecond), archive.WithBatchBytes(8<<10))
	b := uuid.Must(uuid.NewV7()).String()
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: b, Method: "chat"}, 3)
	waitAudit(t, js, 5)
	bLast := auditState(t, js).LastSeq
	natstest.WaitArchived(t, nc, bLast)
	natstest.Purge(t, js, streams.RequestsStream, streams.ResponsesStream)
	if first := auditState(t, js).FirstSeq; first != 1 {
		t.Fatalf("E2A_AUDIT dropped its head already (first %d)", first)
	}
	sums := map[string]*audit.Summary{}
	pushed := false
	_, err := mustAuditor(t, nc).Replay(testCtx(t), audit.Query{RequestIDs: []string{"client-none", b}}, func(rec audit.Record) error {
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
			natstest.WaitArchived(t, nc, auditState(t, js).LastSeq)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := sums[b]; s == nil || s.State != audit.StateComplete {
		t.Errorf("b, archived, dropped from E2A_AUDIT during the replay: %+v, want complete (the archive holds it)", s)
	}
	// A replay begun afterwards finds it (the archive now starts earlier).
	recs, _ := collect(t, mustAuditor(t, nc), audit.Query{RequestIDs: []string{b}})
	if s := summaries(recs)[b]; s == nil || s.State != audit.StateComplete {
		t.Fatalf("b replayed afterwards: %+v", s)
	}
}

func mustAuditor(t *testing.T, nc *nats.Conn) *audit.Auditor {
	t.Helper()
	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// --pool with request ids applies to the envelope E2A_AUDIT holds as to
// the hot one: `e2a replay --pool other <id>` of a request of pool demo
// reports no envelope. It took E2A_AUDIT's, whatever its pool, once the
// hot lookup (by the pool's subject) found none.
func TestReplayPoolFilterWithIDs(t *testing.T) {
	js, nc := server(t)
	a := mustAuditor(t, nc)
	completeRequest(t, js, "demo", &e2a.Envelope{RequestID: "pool-x"}, 1)
	waitAudit(t, js, 3)
	hot, _ := collect(t, a, audit.Query{RequestIDs: []string{"pool-x"}, Pool: "other", Source: audit.SourceHot})
	if s := summaries(hot)["pool-x"]; s == nil || s.RequestFound {
		t.Fatalf("--source hot --pool other: %+v, want no envelope of pool other", s)
	}
	recs, _ := collect(t, a, audit.Query{RequestIDs: []string{"pool-x"}, Pool: "other"})
	for _, r := range recs {
		if r.Kind == audit.KindRequest && r.Pool != "other" {
			t.Errorf("--pool other: reported the envelope of pool %q (%s %d)", r.Pool, r.Stream, r.StreamSeq)
		}
	}
}
