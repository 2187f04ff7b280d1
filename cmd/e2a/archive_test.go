package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// archiveState is what the archive holds against E2A_AUDIT: the
// messages of the streams E2A_AUDIT copies, E2A_AUDIT's message count and
// last sequence, the E2A_ARCHIVE batches and the E2A-Archive-Last header
// of the last one.
type archiveState struct {
	sourced, auditMsgs, auditLast, batches, archivedLast uint64
}

func (s archiveState) String() string {
	return fmt.Sprintf("%d messages in E2A_REQUESTS and E2A_RESPONSES; E2A_AUDIT %d up to %d; E2A_ARCHIVE %d batches up to %d",
		s.sourced, s.auditMsgs, s.auditLast, s.batches, s.archivedLast)
}

// readArchiveState reads archiveState through nc (err: a stream missing,
// a batch without its header).
func readArchiveState(ctx context.Context, nc *nats.Conn) (archiveState, error) {
	var s archiveState
	js, err := jetstream.New(nc)
	if err != nil {
		return s, err
	}
	for _, name := range []string{streams.RequestsStream, streams.ResponsesStream, streams.AuditStream, streams.ArchiveStream} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			return s, fmt.Errorf("%s: %w", name, err)
		}
		state := st.CachedInfo().State
		switch name {
		case streams.AuditStream:
			s.auditMsgs, s.auditLast = state.Msgs, state.LastSeq
		case streams.ArchiveStream:
			s.batches = state.Msgs
		default:
			s.sourced += state.Msgs
		}
	}
	m, err := streams.LastBySubject(ctx, nc, streams.ArchiveStream, subjects.ArchiveBatches)
	if errors.Is(err, streams.ErrNoMessages) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	s.archivedLast, err = strconv.ParseUint(m.Header.Get(subjects.HeaderArchiveLast), 10, 64)
	return s, err
}

// checkArchivedOnce reads every archived record back (archive.Reader, as
// e2a replay does) and fails t unless they are E2A_AUDIT's sequences
// 1..last, each once, in order.
func checkArchivedOnce(t *testing.T, ctx context.Context, nc *nats.Conn, last uint64) {
	t.Helper()
	r, err := archive.NewReader(nc)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := r.Span(ctx)
	if err != nil || !sp.Exists || sp.Empty || sp.First != 1 || sp.Last != last {
		t.Fatalf("archive span %+v (%v), want E2A_AUDIT 1..%d", sp, err, last)
	}
	want := uint64(1)
	for rec, err := range r.Records(ctx, sp, 1) {
		if err != nil {
			t.Fatalf("archived record after %d: %v", want-1, err)
		}
		if rec.Seq != want || !strings.HasPrefix(rec.Subject, "e2a.audit.") || rec.Header.Get(subjects.HeaderStreamSource) == "" {
			t.Fatalf("archived record %d: seq %d subject %q headers %v", want, rec.Seq, rec.Subject, rec.Header)
		}
		want++
	}
	if want != last+1 {
		t.Fatalf("archive holds E2A_AUDIT 1..%d, want 1..%d", want-1, last)
	}
}

// TestDevArchives: `e2a dev` runs the archiver in its process with
// E2A_ARCHIVE=true (it is off by default) on the process's registry: after demo requests,
// E2A_ARCHIVE's last batch reaches E2A_AUDIT's last sequence, the
// archive holds every E2A_AUDIT message once, and /metrics counts the
// batches beside the agent pools' series. Without E2A_ARCHIVE it says it
// does not run the archiver.
func TestDevArchives(t *testing.T) {
	env := []string{"E2A_LOG_FORMAT=json", "E2A_PUSH=off", "E2A_ARCHIVE_FLUSH_INTERVAL=100ms"}
	dev := startDev(t, append(env, "E2A_ARCHIVE=true"))
	base := dev.base
	a, more := waitLine(t, dev.stdout, regexp.MustCompile(`^\s+archiver\s+(.*)$`))
	if !strings.Contains(a[1], "E2A_ARCHIVE") {
		t.Errorf("banner %q", append(append(dev.banner, more...), a[0]))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const requests = 20
	for i := range requests {
		code, body := postWait(t, base, fmt.Sprintf(`{"request_id":"arch-%d","params":{"text":"archive me","frames":3}}`, i))
		if code != http.StatusOK || !strings.Contains(body, `"is_final":true`) {
			t.Fatalf("request %d: %d %s", i, code, body)
		}
	}
	nc, err := nats.Connect(dev.nats)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var s archiveState
	testkit.Eventually(t, 30*time.Second, "E2A_AUDIT holds every request and frame", func() bool {
		s, err = readArchiveState(ctx, nc)
		return err == nil && s.sourced > requests && s.auditMsgs == s.sourced
	})
	testkit.Eventually(t, 30*time.Second, "E2A_ARCHIVE's last batch at E2A_AUDIT's last sequence", func() bool {
		s, err = readArchiveState(ctx, nc)
		return err == nil && s.auditLast > 0 && s.archivedLast == s.auditLast
	})
	t.Logf("%v", s)
	checkArchivedOnce(t, ctx, nc, s.auditLast)
	testkit.Eventually(t, 10*time.Second, "/metrics counts the archived records beside the pools' series", func() bool {
		_, body := httpGet(t, base+"/metrics")
		return strings.Contains(body, "e2a_archive_records_total "+strconv.FormatUint(s.auditLast, 10)+"\n") &&
			strings.Contains(body, "e2a_agent_")
	})

	t.Run("off by default", func(t *testing.T) {
		_, stderr := startBin(t, embeddedEnv(env...), "dev")
		waitLine(t, stderr, regexp.MustCompile(`"msg":"archiver not run here".*"E2A_ARCHIVE":false`))
	})
}

// postWait posts an E2A request with ?wait=true and returns the answer.
func postWait(t *testing.T, base, body string) (int, string) {
	t.Helper()
	resp, b := testkit.Do(t, http.MethodPost, base+"/v1/requests?wait=true", body, "Content-Type", "application/json")
	return resp.StatusCode, string(b)
}

// TestArchiveCommand: `e2a archive` (run as main runs it, with a context
// that SIGTERM or SIGINT cancels) archives E2A_AUDIT on an external
// server, serves /readyz and its e2a_archive_* metrics on E2A_HTTP_ADDR,
// and returns nil soon after its context is cancelled. Without
// E2A_NATS_URL it refuses to start.
func TestArchiveCommand(t *testing.T) {
	srv, nc := natstest.RunServer(t)
	port := natstest.FreePorts(t, 1)[0]
	addr := "http://127.0.0.1:" + strconv.Itoa(port)
	for k, v := range map[string]string{"E2A_NATS_URL": srv.ClientURL(), "E2A_HTTP_ADDR": "127.0.0.1:" + strconv.Itoa(port),
		"E2A_REQUESTS_MAX_BYTES": strconv.Itoa(64 << 20), "E2A_ARCHIVE_FLUSH_INTERVAL": "50ms", "E2A_ARCHIVE_BATCH_BYTES": "4096",
		"E2A_LOG_LEVEL": "warn"} {
		t.Setenv(k, v)
	}
	js := natstest.JetStream(t, nc)
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			id := uuid.NewString()
			natstest.PublishRequest(t, js, "demo", &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: id, Method: "chat.send",
				Params: map[string]any{"text": strings.Repeat("x", 200)}, Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceE2A}})
			natstest.PublishBurst(t, nc, id, 0, 0, natstest.Frame(id, 0, false), natstest.Frame(id, 1, true))
		}
	}
	publish(0, 10) // before the archiver starts: it reads them from E2A_AUDIT's start
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"archive"}) }()
	testkit.Eventually(t, 20*time.Second, "e2a archive ready", func() bool {
		select {
		case err := <-done:
			t.Fatalf("e2a archive ended at start-up: %v", err)
		default:
		}
		code, _ := getStatus(addr + "/readyz")
		return code == http.StatusOK
	})
	publish(10, 30) // while it runs
	var s archiveState
	var err error
	testkit.Eventually(t, 30*time.Second, "E2A_ARCHIVE's last batch at E2A_AUDIT's last sequence (60 requests and frames)", func() bool {
		s, err = readArchiveState(ctx, nc)
		return err == nil && s.auditMsgs == 60 && s.archivedLast == s.auditLast
	})
	if s.batches < 2 {
		t.Errorf("%v: 4 KiB batches expected", s)
	}
	checkArchivedOnce(t, ctx, nc, s.auditLast)
	// The archiver counts a batch once its store is acknowledged, a moment
	// after the batch can be read: wait for the counts.
	wants := []string{"e2a_archive_records_total 60\n", "e2a_archive_batches_total " + strconv.FormatUint(s.batches, 10) + "\n",
		"e2a_archive_missed_total 0\n"}
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("/metrics with %q", wants), func() bool {
		_, body := httpGet(t, addr+"/metrics")
		for _, want := range wants {
			if !strings.Contains(body, want) {
				return false
			}
		}
		return true
	})
	cancel()
	if err := testkit.Receive(t, done, 10*time.Second, "e2a archive did not end after its context was cancelled"); err != nil {
		t.Errorf("e2a archive ended with %v", err)
	}
	if code, _ := getStatus(addr + "/healthz"); code != 0 {
		t.Errorf("the operations listener still answers (%d) after the end", code)
	}

	t.Setenv("E2A_NATS_URL", "")
	if err := run(context.Background(), []string{"archive"}); err == nil || !strings.Contains(err.Error(), "E2A_NATS_URL") {
		t.Errorf("e2a archive without E2A_NATS_URL: %v", err)
	}
}

// getStatus GETs url and returns its status (0 when nothing answers).
func getStatus(url string) (int, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestArchiveConfig: the E2A_ARCHIVE_* variables reach the stream
// definition and the archiver's options with their defaults, a bad value
// is refused when the configuration is read (every command, the variable
// named), and the bounds checked there are exactly those the archive
// package takes.
func TestArchiveConfig(t *testing.T) {
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	sc := cfg.StreamsConfig()
	if cfg.Archive || sc.ArchiveMaxAge != 90*24*time.Hour || sc.ArchiveMaxBytes != 1<<30 ||
		cfg.ArchiveBatchBytes != archive.DefaultBatchBytes || cfg.ArchiveFlushInterval != archive.DefaultFlushInterval {
		t.Errorf("defaults: archive %v, max age %v, max bytes %d, batch %d, flush %v", cfg.Archive, sc.ArchiveMaxAge, sc.ArchiveMaxBytes,
			cfg.ArchiveBatchBytes, cfg.ArchiveFlushInterval)
	}
	if err := sc.Validate(); err != nil {
		t.Error(err)
	}
	for _, c := range []struct{ name, value string }{
		{"E2A_ARCHIVE_MAX_BYTES", "0"},
		{"E2A_ARCHIVE_MAX_BYTES", "-2"},
		{"E2A_ARCHIVE_MAX_BYTES", "1GiB"},
		{"E2A_ARCHIVE_MAX_AGE", "50ms"},
		{"E2A_ARCHIVE_MAX_AGE", "-1h"},
		{"E2A_ARCHIVE_MAX_AGE", "90d"},
		{"E2A_ARCHIVE_BATCH_BYTES", "4095"},
		{"E2A_ARCHIVE_BATCH_BYTES", "8388609"},
		{"E2A_ARCHIVE_BATCH_BYTES", "1MiB"},
		{"E2A_ARCHIVE_FLUSH_INTERVAL", "9ms"},
		{"E2A_ARCHIVE_FLUSH_INTERVAL", "61m"},
		{"E2A_ARCHIVE_FLUSH_INTERVAL", "10"},
		{"E2A_ARCHIVE", "maybe"},
	} {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			t.Setenv(c.name, c.value)
			if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), c.name) {
				t.Errorf("LoadConfig: %v, want an error naming %s", err, c.name)
			}
			// The binary says so and exits 1, whatever the command.
			code, _, errOut := runBin(t, []string{c.name + "=" + c.value, "E2A_NATS_URL="}, "archive")
			if code != exitFailure || !strings.Contains(errOut, c.name) {
				t.Errorf("e2a archive: exit %d, %s", code, errOut)
			}
		})
	}
	for k, v := range map[string]string{"E2A_ARCHIVE_MAX_BYTES": "-1", "E2A_ARCHIVE_MAX_AGE": "0", "E2A_ARCHIVE": "true",
		"E2A_ARCHIVE_BATCH_BYTES": "4096", "E2A_ARCHIVE_FLUSH_INTERVAL": "1h"} {
		t.Setenv(k, v)
	}
	if cfg, err = LoadConfig(); err != nil {
		t.Fatal(err)
	}
	if sc := cfg.StreamsConfig(); !cfg.Archive || sc.ArchiveMaxBytes != streams.Unlimited || sc.ArchiveMaxAge != 0 || sc.Validate() != nil {
		t.Errorf("unlimited, forever, on: archive %v, %+v", cfg.Archive, sc)
	}

	// archive.Run refuses a bad option before anything else, and returns
	// nil on a cancelled context otherwise: the bounds must agree.
	_, nc := natstest.RunServer(t, natstest.WithoutStreams())
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, b := range []int{archive.BatchBytesMin - 1, archive.BatchBytesMin, archive.BatchBytesMax, archive.BatchBytesMax + 1} {
		c := Config{ArchiveMaxBytes: 1, ArchiveBatchBytes: b, ArchiveFlushInterval: time.Second}
		ours, theirs := c.checkArchive(), archive.Run(cancelled, nc, c.archiveOptions(nil, nil)...)
		if (ours == nil) != (theirs == nil) || theirs != nil && !errors.Is(theirs, archive.ErrInvalidOption) {
			t.Errorf("batch bytes %d: config %v, archive %v", b, ours, theirs)
		}
	}
	for _, d := range []time.Duration{archive.FlushIntervalMin - 1, archive.FlushIntervalMin, archive.FlushIntervalMax, archive.FlushIntervalMax + 1} {
		c := Config{ArchiveMaxBytes: 1, ArchiveBatchBytes: archive.DefaultBatchBytes, ArchiveFlushInterval: d}
		ours, theirs := c.checkArchive(), archive.Run(cancelled, nc, c.archiveOptions(nil, nil)...)
		if (ours == nil) != (theirs == nil) || theirs != nil && !errors.Is(theirs, archive.ErrInvalidOption) {
			t.Errorf("flush interval %v: config %v, archive %v", d, ours, theirs)
		}
	}
}
