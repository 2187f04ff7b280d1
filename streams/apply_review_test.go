package streams_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestApplyChangedLimitsThenNoOp: every limit the variables set (ages, bytes, compression,
// including the edge values 0 = forever and -1 = unlimited, and an archive
// age under the 2 min default dedupe window) is applied to the existing
// stream, and applying the same configuration again changes nothing.
func TestApplyChangedLimitsThenNoOp(t *testing.T) {
	_, _, js := startApplied(t)
	cfg := testConfig()
	for i, change := range []func(c *streams.Config){
		func(c *streams.Config) { c.AuditMaxAge, c.AuditMaxBytes = 72*time.Hour, 16<<20 },
		func(c *streams.Config) { c.ArchiveMaxAge, c.ArchiveMaxBytes = time.Minute, streams.Unlimited },
		func(c *streams.Config) { c.ArchiveMaxAge = 0 },
		func(c *streams.Config) { c.AuditMaxAge = 0 },
		func(c *streams.Config) {
			c.ResponsesMaxAge, c.RequestsMaxBytes = time.Hour, 32<<20
			c.AuditCompression, c.ResponsesCompression = jetstream.S2Compression, jetstream.S2Compression
		},
		func(c *streams.Config) { c.Duplicates = 30 * time.Second },
	} {
		change(&cfg)
		rep, err := streams.Apply(ctx(t), js, cfg)
		if err != nil || !rep.Changed() {
			t.Fatalf("change %d: %v\n%s", i, err, rep)
		}
		rep, err = streams.Apply(ctx(t), js, cfg)
		if err != nil || rep.Changed() {
			t.Fatalf("change %d applied again: %v\n%s", i, err, rep)
		}
		defs, err := cfg.StreamConfigs()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range defs {
			s, err := js.Stream(ctx(t), want.Name)
			if err != nil {
				t.Fatal(err)
			}
			have := s.CachedInfo().Config
			if have.MaxAge != want.MaxAge || have.MaxBytes != want.MaxBytes || have.Compression != want.Compression ||
				have.Duplicates != want.Duplicates && want.Duplicates != 0 {
				t.Errorf("change %d: %s holds age %v bytes %d %v dupes %v, want %v %d %v %v", i, want.Name,
					have.MaxAge, have.MaxBytes, have.Compression, have.Duplicates, want.MaxAge, want.MaxBytes, want.Compression, want.Duplicates)
			}
		}
	}
}

// TestApplyUpgradesAnOlderAudit: an E2A_AUDIT created by an earlier version (its sources
// without a start sequence, in the default persist mode) is upgraded in
// place by Apply: its sources get their start sequence without copying
// E2A_REQUESTS and E2A_RESPONSES again, and the next Apply is a no-op.
func TestApplyUpgradesAnOlderAudit(t *testing.T) {
	_, _, js := startServer(t)
	cfg := testConfig()
	for _, sc := range []jetstream.StreamConfig{cfg.RequestsStreamConfig(), cfg.ResponsesStreamConfig()} {
		if _, err := js.CreateStream(ctx(t), sc); err != nil {
			t.Fatal(err)
		}
	}
	old := cfg.AuditStreamConfig()
	old.PersistMode = jetstream.DefaultPersistMode
	for i, s := range old.Sources {
		c := *s
		c.OptStartSeq = 0
		old.Sources[i] = &c
	}
	audit, err := js.CreateStream(ctx(t), old)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		if _, err := js.Publish(ctx(t), "e2a.req.demo.r"+strconv.Itoa(i), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx(t), "e2a.resp.r"+strconv.Itoa(i), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	caughtUp := func(want uint64) func() bool {
		return func() bool {
			info, err := audit.Info(ctx(t))
			if err != nil || len(info.Sources) != 2 || info.State.LastSeq < want {
				return false
			}
			for _, si := range info.Sources {
				if si.Lag != 0 || si.Error != nil {
					return false
				}
			}
			return true
		}
	}
	testkit.Eventually(t, 10*time.Second, "E2A_AUDIT copied everything", caughtUp(2*n))
	rep, err := streams.Apply(ctx(t), js, cfg)
	if err != nil {
		t.Fatalf("Apply over the older E2A_AUDIT: %v\n%s", err, rep)
	}
	if c, _ := rep.Get(streams.AuditStream); c.Action != streams.ActionUpdated {
		t.Errorf("E2A_AUDIT: %+v", c)
	}
	if _, err := js.Publish(ctx(t), "e2a.req.demo.after", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "E2A_AUDIT copied the request after the upgrade", caughtUp(2*n+1))
	if info, _ := audit.Info(ctx(t)); info.State.Msgs != 2*n+1 || info.State.LastSeq != 2*n+1 {
		t.Errorf("E2A_AUDIT holds %d messages (last %d), want %d: a source copied its stream again", info.State.Msgs, info.State.LastSeq, 2*n+1)
	}
	if rep, err := streams.Apply(ctx(t), js, cfg); err != nil || rep.Changed() {
		t.Errorf("Apply after the upgrade: %v\n%s", err, rep)
	}
}

// TestApplyReplicasOnOneServerSaysWhy: asking a single server for replicated streams fails each
// stream with a message that says why (the server's "replicas > 1 not
// supported in non-clustered mode", or the async persist advice for
// E2A_AUDIT), and leaves the streams as they were.
func TestApplyReplicasOnOneServerSaysWhy(t *testing.T) {
	_, _, js := startApplied(t)
	cfg := testConfig()
	cfg.Replicas = 3
	rep, err := streams.Apply(ctx(t), js, cfg)
	if err == nil {
		t.Fatalf("Apply with 3 replicas on one server succeeded:\n%s", rep)
	}
	for _, c := range rep.Changes {
		if c.Action != streams.ActionFailed {
			t.Errorf("%s: %s", c.Name, c.Action)
			continue
		}
		msg := c.Err.Error()
		if !strings.Contains(msg, "replicas") && !strings.Contains(msg, "Replicas") {
			t.Errorf("%s: %q does not say why", c.Name, msg)
		}
		if c.Name == streams.AuditStream && !errors.Is(c.Err, streams.ErrDriftNotUpdatable) {
			t.Errorf("E2A_AUDIT: %v", c.Err)
		}
	}
	t.Logf("report:\n%s", rep)
	for _, name := range []string{streams.RequestsStream, streams.AuditStream, streams.ArchiveStream} {
		s, err := js.Stream(ctx(t), name)
		if err != nil || s.CachedInfo().Config.Replicas != 1 {
			t.Errorf("%s changed: %v", name, err)
		}
	}
}
