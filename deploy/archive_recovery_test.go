package deploy

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// archiveRecoveryBound is how long after a NATS server's SIGKILL the
// archive may take to hold E2A_AUDIT's last message again: the archiver
// notices its lost consumer after two missed 1 s heartbeats, or gives up
// one that delivers nothing for 4 s (3.1-7.6 s measured here), with margin
// for a CI machine loaded by the other packages' tests. With the client's
// default heartbeat (5 s) a lost consumer is noticed after 10 s at the
// earliest (10.2-18 s measured, so this bound lets the old archiver pass
// at its best: archive's TestArchiverGivesUpAConsumerThatDeliversNothing
// fails it); CI once saw nothing archived for 40 s.
const archiveRecoveryBound = 15 * time.Second

// archiveCatchUp is how long the archive may take to hold what E2A_AUDIT
// was given late (0.1 s measured, the archiver's consumer alive; more when
// its consumer is being replaced then).
const archiveCatchUp = 6 * time.Second

// TestArchiveRecoversAfterConsumerNodeKill kills (SIGKILL) the NATS
// server holding the archiver's ordered consumer on E2A_AUDIT while its
// connection and the streams' leaders are on the others, mid-traffic: the
// archive holds E2A_AUDIT's last message within archiveRecoveryBound of
// the kill, every message once.
func TestArchiveRecoversAfterConsumerNodeKill(t *testing.T) {
	archiveRecovery(t, func(ctx context.Context, c *natsCluster, adminNC *nats.Conn, _ jetstream.JetStream, victim *natsNode, opts ...archive.Option) {
		startArchiverConsumerOn(t, ctx, c, adminNC, victim, opts...)
	})
}

// TestArchiveRecoversAfterConnectionNodeKill is
// TestArchiveRecoversAfterConsumerNodeKill with the archiver's connection
// on the killed server too (connection and consumer lost together), as
// `e2a archive` may be in production.
func TestArchiveRecoversAfterConnectionNodeKill(t *testing.T) {
	archiveRecovery(t, func(ctx context.Context, c *natsCluster, _ *nats.Conn, adminJS jetstream.JetStream, victim *natsNode, opts ...archive.Option) {
		startArchiverConnectedTo(t, ctx, c, adminJS, victim, opts...)
	})
}

// notConnected returns a node nc is not connected to.
func notConnected(t *testing.T, c *natsCluster, nc *nats.Conn) *natsNode {
	t.Helper()
	for _, nd := range c.nodes {
		if nd.name != nc.ConnectedServerName() {
			return nd
		}
	}
	t.Fatal("no node but the admin connection's")
	return nil
}

// archiveRecovery starts a 3-node cluster, an archiver on it (start, with
// a short flush), stores traffic as admin (on a node other than the
// victim, every stream led elsewhere), kills the victim mid-traffic, goes
// on for 3 s, and measures how long after the kill the archive holds
// E2A_AUDIT's last sequence: at most archiveRecoveryBound, every message
// once.
func archiveRecovery(t *testing.T, start func(context.Context, *natsCluster, *nats.Conn, jetstream.JetStream, *natsNode, ...archive.Option)) {
	if testing.Short() {
		t.Skip("starts a 3-node nats-server cluster")
	}
	c, ctx, adminNC, adminJS := provisionedCluster(t, 120*time.Second, nil)
	victim := notConnected(t, c, adminNC)
	log := &syncLog{}
	logger := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	defer func() { t.Logf("archiver log:\n%s", log.String()) }()
	for _, s := range []string{streams.RequestsStream, streams.ResponsesStream, streams.AuditStream, streams.ArchiveStream} {
		moveLeader(t, ctx, adminNC, adminJS, s, victim)
	}
	start(ctx, c, adminNC, adminJS, victim, archive.WithFlushInterval(100*time.Millisecond), archive.WithBatchBytes(64<<10), archive.WithLogger(logger))

	var n int
	publish := func(until time.Time) {
		for ; time.Now().Before(until); n++ {
			id := fmt.Sprintf("rec-%d", n)
			natstest.PublishRequest(t, adminJS, "demo", &e2a.Envelope{RequestID: id, Method: "chat", Params: map[string]any{"text": id}})
			natstest.PublishBurst(t, adminNC, id, 0, 0, natstest.Frame(id, 0, false), natstest.Frame(id, 1, true))
		}
	}
	publish(time.Now().Add(2 * time.Second))
	t.Logf("killing %s after %d requests", victim.name, n)
	fmt.Fprintf(log, "---- %s killed\n", victim.name)
	killedAt := time.Now()
	c.kill(victim)
	publish(killedAt.Add(3 * time.Second))
	t.Logf("%d requests stored, the last 3 s after the kill", n)

	// E2A_AUDIT itself may hold the last messages late (its sources
	// recover from the kill too): the archive is given archiveCatchUp
	// after that.
	var first, last, archived uint64
	var err error
	var auditTook time.Duration
	dumped := false
	caught := testkit.Until(60*time.Second, func() bool {
		if !dumped && auditTook > 0 && time.Since(killedAt) > max(archiveRecoveryBound, auditTook+archiveCatchUp) {
			dumped = true // failing: where the archiver is
			logArchiveStuck(t, ctx, adminJS)
		}
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		first, last, archived, err = archiveLag(actx, adminNC)
		if err == nil && last == uint64(2*n) && auditTook == 0 {
			auditTook = time.Since(killedAt)
		}
		return err == nil && last == uint64(2*n) && archived == last
	})
	took := time.Since(killedAt)
	if !caught {
		t.Fatalf("the archive never caught up: E2A_AUDIT %d..%d, archived up to %d (%v), want %d messages", first, last, archived, err, 2*n)
	}
	t.Logf("RECOVERY: archive at E2A_AUDIT's last sequence %d %v after the kill (E2A_AUDIT complete after %v)",
		last, took.Round(10*time.Millisecond), auditTook.Round(10*time.Millisecond))
	if took > max(archiveRecoveryBound, auditTook+archiveCatchUp) {
		t.Errorf("the archive caught up %v after the kill, want within %v (or %v after E2A_AUDIT held every message)",
			took.Round(10*time.Millisecond), archiveRecoveryBound, archiveCatchUp)
	}
	c.waitStreamsSynced(30*time.Second, streams.ArchiveStream)
	checkArchive(t, ctx, adminNC, last)
	if strings.Contains(log.String(), "level=ERROR") {
		t.Errorf("the archiver logged an error")
	}
}

// startArchiverConnectedTo runs archive.Run (with opts, until the test
// ends) as the user archive, connected to nd, and starts it again until
// its ordered consumer on E2A_AUDIT is on nd too (an attempt whose
// consumer lands elsewhere is stopped and its consumer deleted as admin,
// adminJS); E2A_AUDIT must be empty.
func startArchiverConnectedTo(t *testing.T, ctx context.Context, c *natsCluster, adminJS jetstream.JetStream, nd *natsNode,
	opts ...archive.Option) {
	t.Helper()
	audit, err := adminJS.Stream(ctx, streams.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 30; attempt++ {
		nc, _ := c.connectNode("archive", nd)
		actx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		done := make(chan error, 1)
		go func() {
			done <- archive.Run(actx, nc, append(opts, archive.WithRegisterer(prometheus.NewRegistry()))...)
		}()
		var name, leader string
		testkit.Eventually(t, 10*time.Second, "the archiver's consumer on E2A_AUDIT", func() bool {
			n := 0
			for ci := range audit.ListConsumers(ctx).Info() {
				if ci.Cluster != nil {
					name, leader, n = ci.Name, ci.Cluster.Leader, n+1
				}
			}
			return n == 1 && leader != ""
		})
		if leader == nd.name {
			t.Logf("archiver connected to %s, its consumer there too (attempt %d)", nd.name, attempt)
			return
		}
		cancel()
		if err := testkit.Receive(t, done, 10*time.Second, "archiver attempt %d did not stop", attempt); err != nil {
			t.Fatalf("archiver attempt %d: %v", attempt, err)
		}
		nc.Close()
		if err := audit.DeleteConsumer(ctx, name); err != nil && !strings.Contains(err.Error(), "not found") {
			t.Fatalf("delete consumer %s: %v", name, err)
		}
	}
	t.Fatalf("the archiver's consumer never landed on %s in 30 attempts", nd.name)
}

// logArchiveStuck logs, for an archive that did not catch up, E2A_AUDIT's
// consumers (read as admin, adminJS) and this process's goroutines that run
// package archive or nats.go's jetstream.
func logArchiveStuck(t *testing.T, ctx context.Context, adminJS jetstream.JetStream) {
	t.Helper()
	if audit, err := adminJS.Stream(ctx, streams.AuditStream); err == nil {
		info := audit.CachedInfo()
		t.Logf("E2A_AUDIT %d..%d, leader %s", info.State.FirstSeq, info.State.LastSeq, clusterLeader(info.Cluster))
		for ci := range audit.ListConsumers(ctx).Info() {
			t.Logf("E2A_AUDIT consumer %s: delivered up to %d, pending %d, waiting %d, on %s", ci.Name,
				ci.Delivered.Stream, ci.NumPending, ci.NumWaiting, clusterLeader(ci.Cluster))
		}
	}
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	for g := range strings.SplitSeq(b.String(), "\n\n") {
		if strings.Contains(g, "pipeline/archive.") || strings.Contains(g, "nats.go/jetstream.") {
			t.Logf("%s", g)
		}
	}
}
