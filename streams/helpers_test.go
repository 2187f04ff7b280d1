package streams_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// testConfig is DefaultConfig with sizes that fit any test machine.
func testConfig() streams.Config {
	c := streams.DefaultConfig()
	c.RequestsMaxBytes = 64 << 20
	return c
}

// startServer starts a bare embedded server (no streams) and connects to it.
func startServer(t testing.TB) (*streams.Embedded, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	e, err := streams.StartEmbedded(streams.EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	t.Cleanup(e.Shutdown)
	nc, err := e.Connect()
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return e, nc, js
}

// startApplied starts a server and applies testConfig.
func startApplied(t testing.TB) (*streams.Embedded, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	e, nc, js := startServer(t)
	if _, err := streams.Apply(ctx(t), js, testConfig()); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return e, nc, js
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// waitAsync waits until every asynchronous publish of js is acknowledged.
func waitAsync(t testing.TB, js jetstream.JetStream) {
	t.Helper()
	testkit.Receive(t, js.PublishAsyncComplete(), 30*time.Second, "asynchronous publishes not acknowledged")
}
