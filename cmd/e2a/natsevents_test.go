package main

import (
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestStageLogsNATSConnectionEvents: a stage process (an agent worker)
// whose NATS server goes away and comes back says both in its JSON log
// and counts them in /metrics (e2a_nats_connection_events_total); before,
// nats.go said nothing of either, and wrote its asynchronous errors to
// stderr as bare text outside the log format. Every stderr line is JSON.
func TestStageLogsNATSConnectionEvents(t *testing.T) {
	srv := natstest.RunRestartable(t)
	_, stderr := startBin(t, joinEnv(srv.URL(),
		"E2A_LOG_FORMAT=json", "E2A_LOG_LEVEL=info", "E2A_NATS_RECONNECT_WAIT=100ms", "E2A_NATS_NAME=worker-1"), "agent", "--pool", "demo")
	var all []string
	wait := func(msg string) map[string]any {
		t.Helper()
		m, seen := waitLine(t, stderr, regexp.MustCompile(`^\{.*"msg":"`+regexp.QuoteMeta(msg)+`".*\}$`))
		all = append(append(all, seen...), m[0])
		var rec map[string]any
		if err := json.Unmarshal([]byte(m[0]), &rec); err != nil {
			t.Fatalf("%s: %v", m[0], err)
		}
		return rec
	}
	ops := "http://" + wait("agent pool running")["ops"].(string)
	events := func() string {
		t.Helper()
		_, body := httpGet(t, ops+"/metrics")
		var lines []string
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "e2a_nats_connection_events_total{") {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "\n")
	}
	if got := events(); !strings.Contains(got, `{event="disconnected"} 0`) || !strings.Contains(got, `{event="permission_denied"} 0`) {
		t.Fatalf("/metrics before any event:\n%s", got)
	}

	srv.Stop()
	lost := wait("NATS connection lost; reconnecting")
	if lost["level"] != "WARN" || lost["connection"] != "worker-1" {
		t.Errorf("the loss logged as %v", lost)
	}
	srv.Start()
	back := wait("NATS connection restored")
	if back["server"] != srv.URL() {
		t.Errorf("the reconnect logged as %v", back)
	}
	if got := events(); !strings.Contains(got, `{event="disconnected"} 1`) || !strings.Contains(got, `{event="reconnected"} 1`) {
		t.Errorf("/metrics after a loss and a reconnect:\n%s", got)
	}
	for _, l := range all {
		if !strings.HasPrefix(l, "{") {
			t.Errorf("a stderr line outside the log format: %s", l)
		}
	}
}

// TestTailSaysNATSConnectionLost: an operator command that follows the
// pipeline (e2a tail) says on stderr, in its text log, that its connection
// was lost; nats.go alone said nothing (or bare text for an async error).
func TestTailSaysNATSConnectionLost(t *testing.T) {
	srv := natstest.RunRestartable(t)
	srv.ApplyStreams()
	_, stderr := startBin(t, []string{"E2A_NATS_URL=" + srv.URL()}, "tail")
	// Its own connection, by name (ApplyStreams's, just closed, may still
	// be counted: CI on ffafc89), once subscribed: its connect answered
	// (CI on e767e080 stopped the server between its CONNECT and the
	// answer: tail's connect failed with EOF, no loss to log).
	testkit.Eventually(t, 30*time.Second, "e2a tail connected and reading", func() bool { return srv.Subscribed("e2a-tail") })
	srv.Stop()
	waitLine(t, stderr, regexp.MustCompile(`level=WARN msg="NATS connection lost; reconnecting" connection=e2a-tail`))
}

// TestDrainWaitSaysWhatItDropped: a shutdown whose connection cannot be
// drained says so before closing it: while reconnecting (the publishes it
// buffered are dropped) or when the drain does not end within its bound (a
// handler still busy). It closed the connection silently in both.
func TestDrainWaitSaysWhatItDropped(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))

	srv := natstest.RunRestartable(t)
	nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	reconnecting := nc.StatusChanged(nats.RECONNECTING)
	srv.Stop()
	<-reconnecting
	drainWait(nc, time.Minute, log)
	if !nc.IsClosed() || !strings.Contains(logs.String(), "NATS connection closed without draining") {
		t.Errorf("closed %v; log:\n%s", nc.IsClosed(), logs.String())
	}

	logs.Reset()
	srv.Start()
	nc2, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	busy, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	if _, err := nc2.Subscribe("work", func(*nats.Msg) { close(busy); <-release }); err != nil {
		t.Fatal(err)
	}
	if err := nc2.Publish("work", nil); err != nil {
		t.Fatal(err)
	}
	<-busy
	drainWait(nc2, 50*time.Millisecond, log)
	if !nc2.IsClosed() || !strings.Contains(logs.String(), "NATS connection not drained in time: closed") {
		t.Errorf("closed %v; log:\n%s", nc2.IsClosed(), logs.String())
	}
}
