package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// auditEnv starts an embedded server with the streams and a demo agent,
// and returns the configuration the commands read (E2A_NATS_URL set).
func auditEnv(t *testing.T) (Config, *nats.Conn) {
	t.Helper()
	srv, nc := natstest.RunServer(t)
	t.Setenv("E2A_NATS_URL", srv.ClientURL())
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx, nc, "demo", demo.New()) }()
	t.Cleanup(func() { cancel(); <-done })
	return cfg, nc
}

func decodeRecords(t *testing.T, out []byte) []audit.Record {
	t.Helper()
	var recs []audit.Record
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q is not a record: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

func kinds(recs []audit.Record) string {
	var k []string
	for _, r := range recs {
		k = append(k, r.Kind)
	}
	return strings.Join(k, ",")
}

func TestPublishFollowReplayCommands(t *testing.T) {
	cfg, _ := auditEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Two envelopes on stdin, the second a legacy AgentRequest; --follow.
	in := strings.NewReader(`{"request_id":"cli-1","task_id":"task-7","params":{"text":"hi","frames":1}}
{"request_id":"cli-2","task_id":"task-7","req_method":"chat.send","payload":{"text":"yo","frames":2}}`)
	var out, errOut bytes.Buffer
	if err := runPublish(ctx, cfg, []string{"--follow", "--wait", "10s"}, in, &out, &errOut); err != nil {
		t.Fatalf("publish: %v\n%s", err, errOut.String())
	}
	recs := decodeRecords(t, out.Bytes())
	// accepted, 5 frames (reasoning, tool call, tool result, 1 text, complete), summary; then 6 frames.
	if got := kinds(recs); got != "accepted,frame,frame,frame,frame,frame,summary,accepted,frame,frame,frame,frame,frame,frame,summary" {
		t.Fatalf("publish output kinds %s\n%s", got, out.String())
	}
	if recs[0].RequestID != "cli-1" || recs[0].Pool != "demo" || !recs[6].Summary.OK() || recs[6].Summary.State != audit.StateComplete {
		t.Fatalf("publish records %+v %+v", recs[0], recs[6].Summary)
	}

	// replay by task: both requests, checked, exit 0.
	out.Reset()
	errOut.Reset()
	if err := runReplay(ctx, cfg, []string{"--task", "task-7"}, &out, &errOut); err != nil {
		t.Fatalf("replay: %v\n%s", err, errOut.String())
	}
	recs = decodeRecords(t, out.Bytes())
	if got := kinds(recs); got != "request,frame,frame,frame,frame,frame,summary,request,frame,frame,frame,frame,frame,frame,summary" {
		t.Fatalf("replay output kinds %s", got)
	}
	if !strings.Contains(errOut.String(), "2 requests (2 complete") || !strings.Contains(errOut.String(), "0 with violations") {
		t.Fatalf("replay stderr %q", errOut.String())
	}

	// replay by id with --no-frames and a duration --since.
	out.Reset()
	// "nope" does not exist: the records are printed, and the exit status
	// says not found (3), not success.
	if err := runReplay(ctx, cfg, []string{"--no-frames", "--since", "1h", "cli-2", "nope"}, &out, io.Discard); !errors.Is(err, errNotFound) || exitCode(err, io.Discard) != exitNotFound {
		t.Fatalf("replay ids: %v", err)
	}
	if got := kinds(decodeRecords(t, out.Bytes())); got != "request,summary,summary" {
		t.Fatalf("replay ids kinds %s", got)
	}

	// A request with a gap makes replay exit with errViolations.
	nc, err := nats.Connect(cfg.NatsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := runPublishOne(ctx, cfg, `{"request_id":"broken","params":{"text":"x"}}`, "nobody"); err != nil {
		t.Fatal(err)
	}
	storeFrame(t, nc, "broken", 1, `{"protocol_version":"1.0","response_id":"x","request_id":"broken","sequence":1,"is_final":true,"status":"succeeded","response_kind":"e2a.complete","timestamp":"2026-01-01T00:00:00Z","provenance":{"source_protocol":"e2a"},"body":{"result":null}}`)
	out.Reset()
	errOut.Reset()
	err = runReplay(ctx, cfg, []string{"broken"}, &out, &errOut)
	if !errors.Is(err, errViolations) || !strings.Contains(out.String(), "sequence must start at 0") {
		t.Fatalf("replay of a broken request: %v\n%s", err, out.String())
	}

	// Usage errors.
	if err := runReplay(ctx, cfg, nil, io.Discard, io.Discard); err == nil {
		t.Fatal("replay without a selection succeeded")
	}
	if err := runReplay(ctx, cfg, []string{"--since", "yesterday"}, io.Discard, io.Discard); !errors.Is(err, errFlags) {
		t.Fatalf("bad --since: %v", err)
	}
	if err := runPublish(ctx, cfg, nil, strings.NewReader(""), io.Discard, io.Discard); err == nil {
		t.Fatal("empty publish succeeded")
	}
	if err := runReplay(ctx, cfg, []string{"-h"}, io.Discard, io.Discard); !errors.Is(err, errHelp) || exitCode(err, io.Discard) != 0 {
		t.Fatalf("-h: %v", err)
	}
	t.Setenv("E2A_NATS_URL", "")
	cfg2, _ := LoadConfig()
	if err := runTail(ctx, cfg2, nil, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "E2A_NATS_URL") {
		t.Fatalf("tail without a URL: %v", err)
	}
}

func runPublishOne(ctx context.Context, cfg Config, body, pool string) ([]byte, error) {
	var out bytes.Buffer
	err := runPublish(ctx, cfg, []string{"--pool", pool}, strings.NewReader(body), &out, io.Discard)
	return out.Bytes(), err
}

func storeFrame(t *testing.T, nc *nats.Conn, id string, seq int, body string) {
	t.Helper()
	subj, _ := subjects.Response(id)
	if _, err := nc.Request(subj, []byte(body), 5*time.Second); err != nil {
		t.Fatalf("store frame: %v", err)
	}
}

func TestTailCommand(t *testing.T) {
	cfg, _ := auditEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tctx, stop := context.WithCancel(ctx)
	var out testkit.Buffer
	done := make(chan error, 1)
	go func() { done <- runTail(tctx, cfg, []string{"--pool", "demo", "--poll", "20ms"}, &out, io.Discard) }()
	waitOutput := func(s string) {
		t.Helper()
		testkit.Eventually(t, 10*time.Second, s+" in the tail output", func() bool { return strings.Contains(out.String(), s) })
	}
	// A request shown means the live subscription is in place; markers
	// stored before the tail found the end of the stream are not shown, so
	// one is published at each look until one is.
	marker := 0
	testkit.Eventually(t, 10*time.Second, "a marker in the tail output", func() bool {
		if strings.Contains(out.String(), `"kind":"request","request_id":"marker-`) {
			return true
		}
		if _, err := runPublishOne(ctx, cfg, `{"request_id":"marker-`+strconv.Itoa(marker)+`","params":{"text":"m"}}`, "demo"); err != nil {
			t.Fatal(err)
		}
		marker++
		return false
	})
	if _, err := runPublishOne(ctx, cfg, `{"request_id":"tailed","params":{"text":"x","frames":1}}`, "demo"); err != nil {
		t.Fatal(err)
	}
	waitOutput(`"kind":"summary","request_id":"tailed"`)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("tail: %v", err)
	}
	recs := decodeRecords(t, []byte(out.String()))
	var frames int
	for _, r := range recs {
		if r.Kind == audit.KindFrame && r.RequestID == "tailed" {
			frames++
		}
		if r.Kind == audit.KindSummary && (!r.Summary.OK() || r.Summary.State != audit.StateComplete) {
			t.Fatalf("summary %+v", r.Summary)
		}
	}
	if frames != 5 || !strings.Contains(out.String(), `"kind":"request","request_id":"tailed"`) {
		t.Fatalf("tail output:\n%s", out.String())
	}
}

// TestReplayCommandBursts: `e2a replay` prints a frame record per frame of
// a burst (with its place in the burst) and exits 0; a burst whose
// payload does not hold the frames E2A-Frames counts makes it exit 1.
func TestReplayCommandBursts(t *testing.T) {
	cfg, nc := auditEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Pool "nobody": no agent answers, the test writes the frames.
	if _, err := runPublishOne(ctx, cfg, `{"request_id":"cli-burst","params":{"text":"x"}}`, "nobody"); err != nil {
		t.Fatal(err)
	}
	s0 := natstest.PublishBurst(t, nc, "cli-burst", 0, 0, natstest.Frame("cli-burst", 0, false))
	s1 := natstest.PublishBurst(t, nc, "cli-burst", 1, s0, natstest.Frame("cli-burst", 1, false), natstest.Frame("cli-burst", 2, false))
	natstest.PublishBurst(t, nc, "cli-burst", 3, s1, natstest.Frame("cli-burst", 3, false), natstest.Frame("cli-burst", 4, true))
	var out, errOut bytes.Buffer
	if err := runReplay(ctx, cfg, []string{"cli-burst"}, &out, &errOut); err != nil {
		t.Fatalf("replay: %v\n%s\n%s", err, errOut.String(), out.String())
	}
	recs := decodeRecords(t, out.Bytes())
	if got := kinds(recs); got != "request,frame,frame,frame,frame,frame,summary" {
		t.Fatalf("replay output kinds %s\n%s", got, out.String())
	}
	for i, r := range recs[1:6] {
		if r.Sequence == nil || *r.Sequence != int64(i) {
			t.Fatalf("frame record %d: %+v", i, r)
		}
	}
	if recs[1].Burst != nil || recs[2].Burst == nil || *recs[2].Burst != (audit.BurstPos{Index: 0, Frames: 2}) ||
		*recs[3].Burst != (audit.BurstPos{Index: 1, Frames: 2}) || recs[2].StreamSeq != recs[3].StreamSeq {
		t.Fatalf("burst places: %s", out.String())
	}
	if !strings.Contains(out.String(), `"burst":{"index":1,"frames":2}`) || strings.Contains(strings.SplitN(out.String(), "\n", 3)[1], `"burst"`) {
		t.Fatalf("burst field: %s", out.String())
	}
	if s := recs[6].Summary; !s.OK() || s.State != audit.StateComplete || s.Frames != 5 || !strings.Contains(errOut.String(), "5 frames, 0 with violations") {
		t.Fatalf("summary %+v, stderr %q", s, errOut.String())
	}

	// E2A-Frames says 3, the payload holds 2 frames.
	if _, err := runPublishOne(ctx, cfg, `{"request_id":"cli-bad-burst","params":{"text":"x"}}`, "nobody"); err != nil {
		t.Fatal(err)
	}
	subj, _ := subjects.Response("cli-bad-burst")
	m := nats.NewMsg(subj)
	m.Header.Set(subjects.HeaderRequestID, "cli-bad-burst")
	m.Header.Set(subjects.HeaderSequence, "0")
	m.Header.Set(subjects.HeaderFrames, "3")
	m.Data = e2a.AppendBurst(natstest.Frame("cli-bad-burst", 0, false), natstest.Frame("cli-bad-burst", 1, true))
	if _, err := nc.RequestMsg(m, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err := runReplay(ctx, cfg, []string{"cli-bad-burst"}, &out, io.Discard)
	if !errors.Is(err, errViolations) || exitCode(err, io.Discard) != exitFailure {
		t.Fatalf("replay of a bad burst: %v\n%s", err, out.String())
	}
	recs = decodeRecords(t, out.Bytes())
	if s := recs[len(recs)-1].Summary; s == nil || len(s.Violations) != 1 || !strings.Contains(s.Violations[0], `header E2A-Frames is "3": e2a: invalid frame burst`) {
		t.Fatalf("bad burst summary: %s", out.String())
	}
}

// TestPublishUnknownPoolWarns: `e2a publish --pool demoo` (a typo) stores
// the request, as a direct publisher's is, and says on stderr, once, that
// no worker of that pool ever started; a pool with a worker gets no word.
func TestPublishUnknownPoolWarns(t *testing.T) {
	cfg, nc := auditEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	in := strings.NewReader(`{"request_id":"typo-1","params":{"text":"x"}} {"request_id":"typo-2","params":{"text":"y"}}`)
	if err := runPublish(ctx, cfg, []string{"--pool", "demoo"}, in, &out, &errOut); err != nil {
		t.Fatalf("publish: %v\n%s", err, errOut.String())
	}
	if got := kinds(decodeRecords(t, out.Bytes())); got != "accepted,accepted" {
		t.Fatalf("publish output kinds %s", got)
	}
	want := `no worker of pool "demoo" has ever started on this NATS server (no consumer agent-demoo on E2A_REQUESTS)`
	if strings.Count(errOut.String(), want) != 1 {
		t.Fatalf("stderr %q, want once %q", errOut.String(), want)
	}
	// A pool whose consumer exists (a worker of it started once).
	cc, err := streams.AgentConsumerConfig("known", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := natstest.JetStream(t, nc).CreateOrUpdateConsumer(ctx, streams.RequestsStream, cc); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	if err := runPublish(ctx, cfg, []string{"--pool", "known"}, strings.NewReader(`{"request_id":"known-1","params":{"text":"x"}}`), io.Discard, &errOut); err != nil {
		t.Fatalf("publish to known: %v\n%s", err, errOut.String())
	}
	if errOut.Len() != 0 {
		t.Fatalf("publish to a pool with a consumer wrote %q", errOut.String())
	}
}

// TestTailUnknownPoolWarns: `e2a tail --pool demoo` (a typo) says on
// stderr that no worker of that pool ever started, and goes on; it was
// silent for ever. A pool with a worker gets no word.
func TestTailUnknownPoolWarns(t *testing.T) {
	cfg, _ := auditEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := `e2a tail: no worker of pool "demoo" has ever started on this NATS server (no consumer agent-demoo on E2A_REQUESTS)`
	for _, pool := range []string{"demoo", "demo"} {
		tctx, stop := context.WithCancel(ctx)
		var out, errOut testkit.Buffer
		done := make(chan error, 1)
		go func() { done <- runTail(tctx, cfg, []string{"--pool", pool, "--poll", "20ms"}, &out, &errOut) }()
		// The pool is looked at before the first poll: a request tailed
		// means the look was made.
		marker := 0
		testkit.Eventually(t, 10*time.Second, "a marker in the tail output", func() bool {
			if strings.Contains(out.String(), `"kind":"request"`) {
				return true
			}
			if _, err := runPublishOne(ctx, cfg, `{"request_id":"m-`+pool+strconv.Itoa(marker)+`","params":{"text":"m"}}`, pool); err != nil {
				t.Fatal(err)
			}
			marker++
			return false
		})
		stop()
		if err := <-done; err != nil {
			t.Fatalf("tail --pool %s: %v", pool, err)
		}
		if got := strings.Count(errOut.String(), want); got != map[string]int{"demoo": 1, "demo": 0}[pool] {
			t.Fatalf("tail --pool %s: stderr %q", pool, errOut.String())
		}
		if pool == "demo" && errOut.String() != "" {
			t.Fatalf("tail --pool demo wrote %q", errOut.String())
		}
	}
}
