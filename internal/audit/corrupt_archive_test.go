package audit_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Corrupt batches in the archive: a request in one of them is reported
// unreadable, naming the batch; the requests before and after it are
// replayed from the archive as before. Before, a corrupt last batch (its
// headers do not read) failed every replay not of the hot streams alone
// (Reader.Span), and a corrupt batch inside the archive failed every read
// that crossed it, the later requests' too.
func TestReplayAroundCorruptArchiveBatches(t *testing.T) {
	t.Parallel()
	nc, before, lost, after, bad := corruptArchive(t)
	a, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []audit.Source{audit.SourceAuto, audit.SourceAudit} {
		for _, id := range []string{before, after} {
			recs, _ := collect(t, a, audit.Query{RequestIDs: []string{id}, Source: src})
			if count(recs, audit.KindRequest, id) != 1 || count(recs, audit.KindFrame, id) != 4 {
				t.Errorf("%s, source %s: %d requests, %d frames; want 1 and 4", id, src, count(recs, audit.KindRequest, id), count(recs, audit.KindFrame, id))
			}
		}
		_, err := a.Replay(testCtx(t), audit.Query{RequestIDs: []string{lost}, Source: src}, func(audit.Record) error { return nil })
		if !errors.Is(err, audit.ErrHistoryCorrupt) || !errors.Is(err, archive.ErrCorrupt) || !strings.Contains(err.Error(), "batch "+strconv.FormatUint(bad, 10)) {
			t.Errorf("request in the corrupt batch, source %s: %v, want ErrHistoryCorrupt (ErrCorrupt) naming batch %d", src, err, bad)
		}
	}
}

// corruptArchive stores three requests of pool "demo", before, lost and
// after, archived in that order, lost in a batch (bad) whose payload does
// not read, then a last batch whose headers do not read, and leaves them
// in the archive alone (E2A_AUDIT dropped them, the hot streams purged).
func corruptArchive(t *testing.T) (nc *nats.Conn, before, lost, after string, bad uint64) {
	t.Helper()
	cfg := natstest.Config()
	cfg.AuditMaxBytes = 96 << 10
	_, nc = natstest.RunServer(t, natstest.WithConfig(cfg))
	js := natstest.JetStream(t, nc)
	fast := []archive.Option{archive.WithFlushInterval(20 * time.Millisecond), archive.WithBatchBytes(8 << 10)}
	request := func(n uint64) (string, uint64) {
		id := uuid.Must(uuid.NewV7()).String()
		completeRequest(t, js, "demo", &e2a.Envelope{RequestID: id, Method: "chat"}, 3)
		waitAudit(t, js, n)
		return id, auditState(t, js).LastSeq
	}
	stop := natstest.RunArchiver(t, nc, fast...)
	before, beforeLast := request(5)
	natstest.WaitArchived(t, nc, beforeLast)
	stop()
	// The next request's messages are archived in a batch whose payload
	// does not read.
	lost, lostLast := request(10)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	s, err := js.Stream(testCtx(t), streams.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	bad = natstest.StoreArchiveBatch(t, js, map[string]string{
		subjects.HeaderArchiveFirst: strconv.FormatUint(beforeLast+1, 10), subjects.HeaderArchiveLast: strconv.FormatUint(lostLast, 10),
		subjects.HeaderArchiveCount: strconv.FormatUint(lostLast-beforeLast, 10), subjects.HeaderArchiveFrom: now,
		subjects.HeaderArchiveUntil: now, subjects.HeaderArchiveEpoch: s.CachedInfo().Created.UTC().Format(time.RFC3339Nano),
	}, []byte("not zstd"))
	stop = natstest.RunArchiver(t, nc, fast...)
	after, afterLast := request(15)
	natstest.WaitArchived(t, nc, afterLast)
	stop()
	// And the archive ends with a batch whose headers do not read.
	natstest.StoreArchiveBatch(t, js, map[string]string{subjects.HeaderArchiveFirst: "x"}, []byte("not zstd"))
	for i := 0; auditState(t, js).FirstSeq <= afterLast; i++ {
		if i > 2000 {
			t.Fatal("E2A_AUDIT never dropped the requests")
		}
		completeRequest(t, js, "demo", &e2a.Envelope{RequestID: uuid.Must(uuid.NewV7()).String(), Method: "chat"}, 3)
	}
	natstest.Purge(t, js, streams.RequestsStream, streams.ResponsesStream)
	return nc, before, lost, after, bad
}
