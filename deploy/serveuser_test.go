package deploy

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// storeFinished stores, as admin, a finished request of pool demo with a
// UUIDv7 id: its envelope and frames 0..2 (the last final). It returns the
// id.
func storeFinished(t *testing.T, js jetstream.JetStream) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := uuid.Must(uuid.NewV7()).String()
	natstest.PublishRequest(t, js, "demo", &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: id, Method: "chat.send", UserID: "alice"})
	subj, _ := subjects.Response(id)
	for i := range 3 {
		m := nats.NewMsg(subj)
		m.Data = natstest.Frame(id, int64(i), i == 2)
		m.Header.Set(subjects.HeaderRequestID, id)
		m.Header.Set(subjects.HeaderSequence, strconv.Itoa(i))
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("frame %d of %s: %v", i, id, err)
		}
	}
	return id
}

// TestNATSClusterServeReadsHistory: the serve user of
// deploy/nats/accounts.conf (e2a serve, E2A_HISTORY on by default) answers
// GET /v1/requests/{id} for requests the hot streams no longer hold from
// the audit history, as package internal/audit reads it: one still in
// E2A_AUDIT, one E2A_AUDIT dropped too (its byte limit) that only
// E2A_ARCHIVE holds (written by an archiver as the archive user), on three
// real nats-server processes, refused nothing.
func TestNATSClusterServeReadsHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node nats-server cluster")
	}
	c, ctx, adminNC, adminJS := provisionedCluster(t, 90*time.Second, func(cfg *streams.Config) { cfg.AuditMaxBytes = 64 << 10 })
	archNC, archSink := c.connect("archive")
	natstest.RunArchiver(t, archNC, archive.WithFlushInterval(20*time.Millisecond), archive.WithBatchBytes(8<<10))

	old := storeFinished(t, adminJS)
	auditLast := func() (first, last uint64) {
		st, err := adminJS.Stream(ctx, streams.AuditStream)
		if err != nil {
			t.Fatal(err)
		}
		s := st.CachedInfo().State
		return s.FirstSeq, s.LastSeq
	}
	testkit.Eventually(t, 15*time.Second, "E2A_AUDIT copied the old request", func() bool { _, last := auditLast(); return last >= 4 })
	_, oldLast := auditLast()
	natstest.WaitArchived(t, adminNC, oldLast)
	for i := 0; ; i++ {
		if first, _ := auditLast(); first > oldLast {
			break
		}
		if i > 1000 {
			t.Fatal("E2A_AUDIT never dropped the old request")
		}
		storeFinished(t, adminJS)
	}
	recent := storeFinished(t, adminJS)
	testkit.Eventually(t, 15*time.Second, "E2A_AUDIT copied the recent request", func() bool {
		return natstest.StoredWith(t, adminJS, recent, streams.AuditStream) >= 4
	})
	_, last := auditLast()
	natstest.WaitArchived(t, adminNC, last)
	c.waitStreamsSynced(30*time.Second, streams.AuditStream, streams.ArchiveStream)
	natstest.Purge(t, adminJS, streams.RequestsStream, streams.ResponsesStream)

	serveNC, serveSink := c.connect("serve")
	a, err := audit.New(serveNC)
	if err != nil {
		t.Fatal(err)
	}
	web := pipetest.ServeHistory(t, serveNC, a, egress.WithHistoryLimits(8, 20*time.Second))
	for _, c := range []struct{ what, id string }{{"in E2A_ARCHIVE only", old}, {"in E2A_AUDIT", recent}} {
		status, view, derr := pipetest.GetRequestView(t, web.URL, c.id)
		if status != http.StatusOK || derr != nil || view.State != egress.StateSucceeded || len(view.Frames) != 3 || len(view.Envelope) == 0 {
			t.Errorf("GET %s (%s) as serve: %d %+v (%v)", c.id, c.what, status, view, derr)
		}
	}
	for who, sink := range map[string]*errSink{"serve": serveSink, "archive": archSink} {
		if sink.waitFor(0, "permissions violation") == nil {
			t.Errorf("the %s user was refused something: %s", who, sink)
		}
	}
}
