package deploy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// archiveLag reads, through nc, E2A_AUDIT's first and last sequences and
// the E2A-Archive-Last header of E2A_ARCHIVE's last batch (0 when the
// archive is empty).
func archiveLag(ctx context.Context, nc *nats.Conn) (auditFirst, auditLast, archived uint64, err error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, 0, 0, err
	}
	st, err := js.Stream(ctx, streams.AuditStream)
	if err != nil {
		return 0, 0, 0, err
	}
	state := st.CachedInfo().State
	m, err := streams.LastBySubject(ctx, nc, streams.ArchiveStream, subjects.ArchiveBatches)
	if errors.Is(err, streams.ErrNoMessages) {
		return state.FirstSeq, state.LastSeq, 0, nil
	}
	if err != nil {
		return 0, 0, 0, err
	}
	archived, err = strconv.ParseUint(m.Header.Get(subjects.HeaderArchiveLast), 10, 64)
	return state.FirstSeq, state.LastSeq, archived, err
}

// waitArchived waits (within) until E2A_ARCHIVE's last batch reaches
// E2A_AUDIT's last sequence, read through nc, and returns that sequence.
// Call it once nothing is written to E2A_AUDIT any more.
func waitArchived(t *testing.T, ctx context.Context, nc *nats.Conn, within time.Duration) uint64 {
	t.Helper()
	var first, last, archived uint64
	var err error
	defer func() {
		if t.Failed() {
			t.Logf("E2A_AUDIT %d..%d, archived up to %d (%v)", first, last, archived, err)
		}
	}()
	testkit.Eventually(t, within, "E2A_ARCHIVE's last batch at E2A_AUDIT's last sequence", func() bool {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		first, last, archived, err = archiveLag(actx, nc)
		return err == nil && last > 0 && archived == last
	})
	if first != 1 {
		t.Errorf("E2A_AUDIT starts at %d: it dropped messages, the test cannot tell whether all were archived", first)
	}
	return last
}

// checkArchive reads every batch of E2A_ARCHIVE through nc and fails t
// unless they hold E2A_AUDIT's messages 1..last each exactly once, in
// order: each batch starts where the one before ended (no message stored
// twice, none skipped), its headers say what it holds, and its records
// decode to those sequences with their E2A_AUDIT subjects and headers. It
// returns the number of batches.
func checkArchive(t *testing.T, ctx context.Context, nc *nats.Conn, last uint64) int {
	t.Helper()
	var batches []streams.RawMsg
	var err error
	for range 3 { // a direct get answered by no replica in time is asked again
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		batches, err = streams.DirectGetAll(rctx, nc, streams.ArchiveStream, subjects.ArchiveBatches, 0, 16)
		cancel()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("read E2A_ARCHIVE: %v", err)
	}
	next := uint64(1)
	for _, b := range batches {
		first, err1 := strconv.ParseUint(b.Header.Get(subjects.HeaderArchiveFirst), 10, 64)
		bl, err2 := strconv.ParseUint(b.Header.Get(subjects.HeaderArchiveLast), 10, 64)
		count, err3 := strconv.Atoi(b.Header.Get(subjects.HeaderArchiveCount))
		recs, err4 := archive.Decode(b.Data)
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			t.Fatalf("batch %d: %v", b.Seq, err)
		}
		if first != next || bl < first || count != int(bl-first+1) || len(recs) != count {
			t.Fatalf("batch %d holds E2A_AUDIT %d..%d (%d records, header count %d), want it to start at %d", b.Seq, first, bl, len(recs), count, next)
		}
		for i, r := range recs {
			if r.Seq != first+uint64(i) || r.Header.Get(subjects.HeaderStreamSource) == "" || r.Subject == "" {
				t.Fatalf("batch %d record %d: seq %d subject %q headers %v", b.Seq, i, r.Seq, r.Subject, r.Header)
			}
		}
		next = bl + 1
	}
	if next != last+1 {
		t.Fatalf("E2A_ARCHIVE holds E2A_AUDIT 1..%d in %d batches, want 1..%d", next-1, len(batches), last)
	}
	return len(batches)
}

// checkArchiveCounters fails t unless the archiver's /metrics (scrape,
// the text format) count no message missed or skipped: in a run where
// E2A_AUDIT drops nothing and every message fits a batch, both stay 0.
func checkArchiveCounters(t *testing.T, who, scrape string) {
	t.Helper()
	for _, name := range []string{"e2a_archive_missed_total", "e2a_archive_skipped_total", "e2a_archive_records_total"} {
		v := "absent"
		for _, l := range strings.Split(scrape, "\n") {
			if x, ok := strings.CutPrefix(l, name+" "); ok {
				v = x
			}
		}
		if zero := v == "0"; zero != (name != "e2a_archive_records_total") || v == "absent" {
			t.Errorf("%s: %s %s", who, name, v)
		}
	}
}

// consumerArchiver is an archiver started by startArchiverConsumerOn.
type consumerArchiver struct {
	sink *errSink             // its connection's asynchronous errors
	reg  *prometheus.Registry // its metrics
	done <-chan error         // Run's result
}

// startArchiverConsumerOn runs archive.Run (with opts, until ctx ends) as
// the user archive, connected to a node other than victim, and starts it
// again until the ordered consumer it reads E2A_AUDIT with (R1, placed by
// the meta leader on one of the stream's servers) is on victim; it moves
// the leadership of E2A_ARCHIVE and E2A_AUDIT off victim first. Killing
// victim then takes the archiver's consumer away while its connection and
// both streams stay up, so that nothing but the consumer's missing
// heartbeats tells it (a failed publish, stream info or reconnect would
// start it over anyway).
// An attempt whose consumer lands elsewhere is stopped and its consumer
// deleted (as admin); E2A_AUDIT must be empty (nothing archived twice).
func startArchiverConsumerOn(t *testing.T, ctx context.Context, c *natsCluster, adminNC *nats.Conn, victim *natsNode,
	opts ...archive.Option) consumerArchiver {
	t.Helper()
	adminJS, err := jetstream.New(adminNC)
	if err != nil {
		t.Fatal(err)
	}
	moveLeader(t, ctx, adminNC, adminJS, streams.ArchiveStream, victim)
	moveLeader(t, ctx, adminNC, adminJS, streams.AuditStream, victim)
	var other *natsNode
	for _, nd := range c.nodes {
		if nd != victim {
			other = nd
		}
	}
	audit, err := adminJS.Stream(ctx, streams.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	consumers := func() map[string]string { // name → leader
		out := map[string]string{}
		for ci := range audit.ListConsumers(ctx).Info() {
			if ci.Cluster != nil {
				out[ci.Name] = ci.Cluster.Leader
			}
		}
		return out
	}
	for attempt := 1; attempt <= 30; attempt++ {
		nc, sink := c.connectNode("archive", other)
		reg := prometheus.NewRegistry()
		actx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		done := make(chan error, 1)
		go func() { done <- archive.Run(actx, nc, append(opts, archive.WithRegisterer(reg))...) }()
		var leader string
		testkit.Eventually(t, 10*time.Second, "the archiver's consumer on E2A_AUDIT", func() bool {
			cs := consumers()
			for _, l := range cs {
				leader = l
			}
			return len(cs) == 1 && leader != ""
		})
		if leader == victim.name {
			t.Logf("archiver connected to %s, its consumer on %s (attempt %d)", other.name, victim.name, attempt)
			return consumerArchiver{sink: sink, reg: reg, done: done}
		}
		cancel()
		if err := testkit.Receive(t, done, 10*time.Second, "archiver attempt %d did not stop", attempt); err != nil {
			t.Fatalf("archiver attempt %d: %v", attempt, err)
		}
		nc.Close()
		for name := range consumers() {
			if err := audit.DeleteConsumer(ctx, name); err != nil {
				t.Fatalf("delete consumer %s: %v", name, err)
			}
		}
	}
	t.Fatalf("the archiver's consumer never landed on %s in 30 attempts", victim.name)
	return consumerArchiver{}
}

// moveLeader makes a node other than from lead stream (a leader step-down
// when from leads it).
func moveLeader(t *testing.T, ctx context.Context, adminNC *nats.Conn, adminJS jetstream.JetStream, stream string, from *natsNode) {
	t.Helper()
	leader := func() string {
		s, err := adminJS.Stream(ctx, stream)
		if err != nil || s.CachedInfo().Cluster == nil {
			return ""
		}
		return s.CachedInfo().Cluster.Leader
	}
	testkit.Eventually(t, 20*time.Second, stream+" led by a node other than "+from.name, func() bool {
		switch leader() {
		case "":
			return false
		case from.name:
			_, _ = adminNC.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil, 5*time.Second)
			return false
		}
		return true
	})
}

// logArchiverState logs, for a failure of the archive's checks, what the
// archiver reports of itself (its e2a_archive_* metrics: stalled for,
// batches, conflicts) and the consumers on E2A_AUDIT (the archiver's
// ordered consumer among them: where it is delivered up to, what is
// pending, its server), read with the admin connection's js. CI once saw
// the archive stop behind E2A_AUDIT after a NATS server's kill with
// nothing in the archiver's log.
func logArchiverState(t *testing.T, ctx context.Context, js jetstream.JetStream, p *e2aProc) {
	t.Helper()
	if resp, err := http.Get(p.url() + "/metrics"); err != nil {
		t.Logf("archiver metrics: %v", err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for l := range strings.Lines(string(b)) {
			if strings.HasPrefix(l, "e2a_archive_") || strings.HasPrefix(l, "e2a_nats_connection_events_total") {
				t.Logf("archiver: %s", strings.TrimSpace(l))
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, streams.AuditStream)
	if err != nil {
		t.Logf("E2A_AUDIT: %v", err)
		return
	}
	info := st.CachedInfo()
	t.Logf("E2A_AUDIT: %d..%d, leader %s", info.State.FirstSeq, info.State.LastSeq, clusterLeader(info.Cluster))
	cons := st.ListConsumers(ctx)
	for ci := range cons.Info() {
		t.Logf("E2A_AUDIT consumer %s: delivered up to %d, pending %d, ack pending %d, on %s", ci.Name,
			ci.Delivered.Stream, ci.NumPending, ci.NumAckPending, clusterLeader(ci.Cluster))
	}
	if err := cons.Err(); err != nil {
		t.Logf("E2A_AUDIT consumers: %v", err)
	}
}

// clusterLeader names the leader of c ("" outside a cluster).
func clusterLeader(c *jetstream.ClusterInfo) string {
	if c == nil {
		return ""
	}
	return c.Leader
}
