package archive_test

import (
	"context"
	"strconv"
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

// traffic stores n requests of pool "p" with three frames each (ids
// <prefix>-<i>), which E2A_AUDIT sources.
func traffic(t *testing.T, nc *nats.Conn, js jetstream.JetStream, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		id := prefix + "-" + strconv.Itoa(i)
		ids[i] = id
		natstest.PublishRequest(t, js, "p", &e2a.Envelope{RequestID: id, Method: "chat", Params: map[string]any{"text": "hello " + id}})
		seq := natstest.PublishBurst(t, nc, id, 0, 0, natstest.Frame(id, 0, false), natstest.Frame(id, 1, false))
		natstest.PublishBurst(t, nc, id, 2, seq, natstest.Frame(id, 2, true))
	}
	return ids
}

// auditLast returns E2A_AUDIT's last sequence once its sources have copied
// want messages.
func auditLast(t *testing.T, js jetstream.JetStream, want uint64) uint64 {
	t.Helper()
	var last uint64
	testkit.Eventually(t, 10*time.Second, "E2A_AUDIT sourced every message", func() bool {
		st, err := js.Stream(context.Background(), streams.AuditStream)
		if err != nil {
			return false
		}
		last = st.CachedInfo().State.LastSeq
		return st.CachedInfo().State.Msgs >= want
	})
	return last
}

// openSpan returns a Reader of the archive on nc and the span it holds.
func openSpan(t *testing.T, nc *nats.Conn) (*archive.Reader, archive.Span) {
	t.Helper()
	r, err := archive.NewReader(nc)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := r.Span(context.Background())
	if err != nil {
		t.Fatalf("span: %v", err)
	}
	return r, sp
}

// batches returns every batch E2A_ARCHIVE holds, decoded.
func batches(t *testing.T, nc *nats.Conn) []*archive.Batch {
	t.Helper()
	r, sp := openSpan(t, nc)
	ctx := context.Background()
	var out []*archive.Batch
	for seq := sp.FirstBatch; !sp.Empty && seq <= sp.LastBatch; seq++ {
		b, err := r.Load(ctx, seq)
		if err != nil {
			t.Fatalf("batch %d: %v", seq, err)
		}
		out = append(out, b)
	}
	return out
}

// auditLastAtLeast waits until E2A_AUDIT's last sequence is at least n.
func auditLastAtLeast(t *testing.T, js jetstream.JetStream, n uint64) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, "E2A_AUDIT copied every message", func() bool {
		st, err := js.Stream(context.Background(), streams.AuditStream)
		return err == nil && st.CachedInfo().State.LastSeq >= n
	})
}

// runArchivers runs n archivers, each on a connection of its own to srv,
// with the fast options and their metrics on reg, until the test ends.
func runArchivers(t *testing.T, srv *streams.Embedded, n int, reg prometheus.Registerer) {
	t.Helper()
	for range n {
		nc, err := srv.Connect()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		natstest.RunArchiver(t, nc, append(fast, archive.WithRegisterer(reg))...)
	}
}
