package streams_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
)

// TestApplyCompression: a stream's compression changes in place through
// Apply (nats-server updates it; the messages already stored stay), the
// audit is not compressed by default, and a value other than none or S2
// is refused.
func TestApplyCompression(t *testing.T) {
	_, _, js := startServer(t)
	cfg := testConfig()
	cfg.AuditCompression = jetstream.NoCompression
	if rep, err := streams.Apply(ctx(t), js, cfg); err != nil {
		t.Fatalf("first Apply: %v\n%s", err, rep)
	}
	if _, err := js.Publish(ctx(t), "e2a.resp.r1", []byte(`{"seq":0}`)); err != nil {
		t.Fatal(err)
	}
	cfg.ResponsesCompression = jetstream.S2Compression
	cfg.AuditCompression = jetstream.S2Compression
	rep, err := streams.Apply(ctx(t), js, cfg)
	if err != nil {
		t.Fatalf("second Apply: %v\n%s", err, rep)
	}
	for _, name := range []string{streams.ResponsesStream, streams.AuditStream} {
		c, _ := rep.Get(name)
		if c.Action != streams.ActionUpdated || len(c.Drift) != 1 || c.Drift[0] != "Compression: None -> S2" {
			t.Fatalf("%s: %+v", name, c)
		}
		s, err := js.Stream(ctx(t), name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.Compression != jetstream.S2Compression {
			t.Fatalf("%s compression %s after Apply", name, info.Config.Compression)
		}
	}
	if m, err := js.Stream(ctx(t), streams.ResponsesStream); err != nil {
		t.Fatal(err)
	} else if _, err := m.GetLastMsgForSubject(ctx(t), "e2a.resp.r1"); err != nil {
		t.Fatalf("frame stored before the change: %v", err)
	}
	if got := streams.DefaultConfig().AuditCompression; got != jetstream.NoCompression {
		t.Fatalf("default audit compression %s", got)
	}
	bad := streams.DefaultConfig()
	bad.ResponsesCompression = jetstream.StoreCompression(7)
	if err := bad.Validate(); !errors.Is(err, streams.ErrInvalidConfig) {
		t.Fatalf("compression 7: %v", err)
	}
}
