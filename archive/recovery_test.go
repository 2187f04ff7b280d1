package archive_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// auditConsumers returns the names of E2A_AUDIT's consumers.
func auditConsumers(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, streams.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	l := st.ConsumerNames(ctx)
	for n := range l.Name() {
		names = append(names, n)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// archivingOne starts a server with n requests' traffic and an archiver
// that has archived it (3 audit messages a request), and returns the
// connection, its JetStream, the archiver's stop and its one consumer's
// name.
func archivingOne(t *testing.T, n int) (*nats.Conn, jetstream.JetStream, func(), string) {
	t.Helper()
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	traffic(t, nc, js, "a", n)
	stop := natstest.RunArchiver(t, nc, fast...)
	natstest.WaitArchived(t, nc, auditLast(t, js, uint64(3*n)))
	names := auditConsumers(t, js)
	if len(names) != 1 {
		t.Fatalf("E2A_AUDIT's consumers: %v, want the archiver's", names)
	}
	return nc, js, stop, names[0]
}

// A consumer that delivers nothing more while E2A_AUDIT grows (here
// paused for an hour; in production lost with its server, or recreated
// in vain while the cluster elects leaders) is given up within seconds:
// the archiver starts again from the archive's last batch with a new
// consumer, archives the rest, each message once, and deletes the one it
// gave up.
func TestArchiverGivesUpAConsumerThatDeliversNothing(t *testing.T) {
	t.Parallel()
	nc, js, _, name := archivingOne(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.PauseConsumer(ctx, streams.AuditStream, name, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	traffic(t, nc, js, "b", 5)
	last := auditLast(t, js, 30)
	r, _ := openSpan(t, nc)
	testkit.Eventually(t, 9*time.Second, "the archive at E2A_AUDIT's last message", func() bool {
		sp, err := r.Span(context.Background())
		return err == nil && sp.Last >= last
	})
	t.Logf("archived %v after the consumer stopped delivering", time.Since(start).Round(time.Millisecond))
	checkContiguous(t, batches(t, nc), 1, last)
	testkit.Eventually(t, 5*time.Second, "the consumer given up deleted", func() bool {
		for _, n := range auditConsumers(t, js) {
			if n == name {
				return false
			}
		}
		return true
	})
}

// An archiver stopped deletes its consumer: it does not stay on the
// server for its inactive threshold (5 minutes).
func TestStoppedArchiverDeletesItsConsumer(t *testing.T) {
	t.Parallel()
	_, js, stop, _ := archivingOne(t, 2)
	stop()
	if names := auditConsumers(t, js); len(names) != 0 {
		t.Fatalf("E2A_AUDIT's consumers after the archiver stopped: %v", names)
	}
}
