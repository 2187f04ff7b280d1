package streams_test

import (
	"errors"
	"os"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestStartInMemory: every stream and bucket of the layout exists in
// memory storage, none reserving more than 64 MiB, and a request published
// on its subject is stored.
func TestStartInMemory(t *testing.T) {
	m, err := streams.StartInMemory(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	if m.Config.Storage != jetstream.MemoryStorage || m.Config.RequestsMaxBytes != 64*streams.MiB {
		t.Fatalf("config applied: storage %v, requests max bytes %d", m.Config.Storage, m.Config.RequestsMaxBytes)
	}
	want, err := m.Config.StreamConfigs()
	if err != nil {
		t.Fatal(err)
	}
	kvs, err := m.Config.KeyValueConfigs()
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range kvs {
		want = append(want, jetstream.StreamConfig{Name: "KV_" + kv.Bucket})
	}
	for _, w := range want {
		s, err := m.JetStream.Stream(ctx(t), w.Name)
		if err != nil {
			t.Fatalf("stream %s: %v", w.Name, err)
		}
		if st := s.CachedInfo().Config.Storage; st != jetstream.MemoryStorage {
			t.Errorf("stream %s: storage %v", w.Name, st)
		}
		if n := s.CachedInfo().Config.MaxBytes; n > 64*streams.MiB {
			t.Errorf("stream %s: max bytes %d, more than 64 MiB reserved", w.Name, n)
		}
	}

	subj, err := subjects.Request("demo", "req-1")
	if err != nil {
		t.Fatal(err)
	}
	ack, err := m.JetStream.Publish(ctx(t), subj, []byte(`{"request_id":"req-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if ack.Stream != streams.RequestsStream {
		t.Fatalf("stored in %s", ack.Stream)
	}
	got, err := streams.LastBySubject(ctx(t), m.Conn, streams.RequestsStream, subj)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != ack.Sequence || string(got.Data) != `{"request_id":"req-1"}` {
		t.Fatalf("stored %d %q, published %d", got.Seq, got.Data, ack.Sequence)
	}
}

// TestStartInMemoryConfigChange: a change given as an option is applied.
func TestStartInMemoryConfigChange(t *testing.T) {
	m, err := streams.StartInMemory(ctx(t), streams.WithConfigChange(func(c *streams.Config) {
		c.ControlMaxBytes = 8 * streams.MiB
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	s, err := m.JetStream.Stream(ctx(t), streams.ControlStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().Config.MaxBytes; n != 8*streams.MiB || m.Config.ControlMaxBytes != n {
		t.Fatalf("E2A_CONTROL max bytes %d, Config %d", n, m.Config.ControlMaxBytes)
	}
}

// TestStartInMemoryRefused: a nil option or a nil change is refused with
// ErrInvalidOptions, a change that makes the Config invalid with
// ErrInvalidConfig, each before a server starts (none leaves a store
// directory).
func TestStartInMemoryRefused(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for name, c := range map[string]struct {
		opt  streams.InMemoryOption
		want error
	}{
		"nil option":     {nil, streams.ErrInvalidOptions},
		"nil change":     {streams.WithConfigChange(nil), streams.ErrInvalidOptions},
		"invalid config": {streams.WithConfigChange(func(c *streams.Config) { c.Replicas = 0 }), streams.ErrInvalidConfig},
	} {
		m, err := streams.StartInMemory(ctx(t), c.opt)
		if !errors.Is(err, c.want) || m != nil {
			if m != nil {
				m.Close()
			}
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	noStoreDirs(t, tmp)
}

// TestStartInMemoryApplyFails: when the server refuses a stream (one
// larger than its memory limit), StartInMemory returns the error and
// shuts down the server it started, its store directory removed.
func TestStartInMemoryApplyFails(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	m, err := streams.StartInMemory(ctx(t), streams.WithConfigChange(func(c *streams.Config) {
		c.ResponsesMaxBytes = 1 << 60 // more than any machine's memory
	}))
	if err == nil {
		m.Close()
		t.Fatal("a stream larger than the server's memory was accepted")
	}
	if m != nil {
		t.Fatalf("an InMemory with the error %v", err)
	}
	// nats-server's JSMemoryResourcesExceededErr, which nats.go names not.
	const memoryResourcesExceeded jetstream.ErrorCode = 10028
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != memoryResourcesExceeded {
		t.Fatalf("error %v, want the server's insufficient memory resources", err)
	}
	noStoreDirs(t, tmp)
}

// TestInMemoryClose: Close closes the connection and stops the server: a
// new connection to its address fails. A second Close does nothing.
func TestInMemoryClose(t *testing.T) {
	m, err := streams.StartInMemory(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	url, dir := m.Server.ClientURL(), m.Server.StoreDir()
	m.Close()
	if !m.Conn.IsClosed() {
		t.Error("connection still open")
	}
	if m.Server.Server().Running() {
		t.Error("server still running")
	}
	if nc, err := nats.Connect(url, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Errorf("connected to %s after Close", url)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("store directory %s: %v", dir, err)
	}
	m.Close()
}

// noStoreDirs fails when dir (TMPDIR) holds anything: an embedded server
// left running, or shut down without its temporary store removed.
func noStoreDirs(t *testing.T, dir string) {
	t.Helper()
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left in TMPDIR: %s", e.Name())
	}
}
