package streams_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

func TestApplyIdempotentAndDrift(t *testing.T) {
	_, _, js := startServer(t)
	cfg := testConfig()

	rep, err := streams.Apply(ctx(t), js, cfg)
	if err != nil {
		t.Fatalf("first Apply: %v\n%s", err, rep)
	}
	if len(rep.Changes) != 7 || !rep.Changed() {
		t.Fatalf("first Apply report:\n%s", rep)
	}
	for _, c := range rep.Changes {
		if c.Action != streams.ActionCreated {
			t.Fatalf("first Apply: %s %s", c.Name, c.Action)
		}
	}

	rep, err = streams.Apply(ctx(t), js, cfg)
	if err != nil {
		t.Fatalf("second Apply: %v", err)
	}
	if rep.Changed() {
		t.Fatalf("second Apply changed something:\n%s", rep)
	}
	for _, c := range rep.Changes {
		if c.Action != streams.ActionUnchanged || len(c.Drift) != 0 {
			t.Fatalf("second Apply: %s %s %v", c.Name, c.Action, c.Drift)
		}
	}

	// Change updatable fields.
	cfg.RequestsMaxAge = time.Hour
	cfg.TasksHistory = 10
	rep, err = streams.Apply(ctx(t), js, cfg)
	if err != nil {
		t.Fatalf("third Apply: %v", err)
	}
	c, _ := rep.Get(streams.RequestsStream)
	if c.Action != streams.ActionUpdated || len(c.Drift) != 1 || c.Drift[0] != "MaxAge: 24h0m0s -> 1h0m0s" {
		t.Fatalf("requests after MaxAge change: %+v", c)
	}
	c, _ = rep.Get(streams.TasksBucket)
	if c.Action != streams.ActionUpdated || len(c.Drift) != 1 || c.Drift[0] != "MaxMsgsPerSubject: 5 -> 10" {
		t.Fatalf("tasks after history change: %+v", c)
	}
	for _, name := range []string{streams.ResponsesStream, streams.ControlStream, streams.AuditStream, streams.RateLimitBucket} {
		if c, _ := rep.Get(name); c.Action != streams.ActionUnchanged {
			t.Fatalf("%s: %+v", name, c)
		}
	}
	s, err := js.Stream(ctx(t), streams.RequestsStream)
	if err != nil || s.CachedInfo().Config.MaxAge != time.Hour {
		t.Fatalf("server MaxAge not updated: %v", err)
	}
	if rep, err := streams.Apply(ctx(t), js, cfg); err != nil || rep.Changed() {
		t.Fatalf("Apply after update: %v\n%s", err, rep)
	}

	// A field the server cannot update is reported, not ignored.
	mem := cfg
	mem.Storage = jetstream.MemoryStorage
	rep, err = streams.Apply(ctx(t), js, mem)
	if !errors.Is(err, streams.ErrDriftNotUpdatable) {
		t.Fatalf("storage change: err = %v", err)
	}
	for _, c := range rep.Changes {
		if c.Action != streams.ActionFailed || !errors.Is(c.Err, streams.ErrDriftNotUpdatable) || !strings.Contains(strings.Join(c.Drift, ";"), "Storage: File -> Memory") {
			t.Fatalf("%s: %+v", c.Name, c)
		}
	}
	if !strings.Contains(rep.String(), "stream E2A_REQUESTS: failed (Storage: File -> Memory)") {
		t.Fatalf("report:\n%s", rep)
	}
	// The stream was left alone.
	if s, _ := js.Stream(ctx(t), streams.RequestsStream); s.CachedInfo().Config.Storage != jetstream.FileStorage {
		t.Fatal("storage changed")
	}
}

func TestApplyInvalid(t *testing.T) {
	_, _, js := startServer(t)
	bad := testConfig()
	bad.Replicas = 0
	if _, err := streams.Apply(ctx(t), js, bad); !errors.Is(err, streams.ErrInvalidConfig) {
		t.Fatalf("invalid config: %v", err)
	}
	if _, err := streams.Apply(ctx(t), js, testConfig(), nil); !errors.Is(err, streams.ErrInvalidOptions) {
		t.Fatalf("nil option: %v", err)
	}
	if _, err := streams.Apply(ctx(t), js, testConfig(), streams.WithKeyValue(jetstream.KeyValueConfig{Bucket: "a.b"})); !errors.Is(err, streams.ErrInvalidOptions) {
		t.Fatalf("invalid bucket: %v", err)
	}
	// Replicas 3 on a single server: the server's error, reported per stream.
	r3 := testConfig()
	r3.Replicas = 3
	rep, err := streams.Apply(ctx(t), js, r3)
	if err == nil || rep.Changed() {
		t.Fatalf("R3 on one server: %v\n%s", err, rep)
	}
}

// TestApplyLeavesIdempotencyBucket: a deployment upgraded from a version
// that provisioned E2A_IDEMPOTENCY (never read or written) still has it.
// Apply neither reports nor touches it, so every stage's start-up check
// passes with it present; an operator deletes it as admin
// (docs/operations.md).
func TestApplyLeavesIdempotencyBucket(t *testing.T) {
	_, _, js := startServer(t)
	cfg := testConfig()
	old := jetstream.KeyValueConfig{Bucket: "E2A_IDEMPOTENCY", Description: "E2A idempotency keys", History: 1,
		TTL: 24 * time.Hour, Storage: cfg.Storage, Replicas: cfg.Replicas, MaxBytes: cfg.KeyValueMaxBytes}
	if _, err := js.CreateKeyValue(ctx(t), old); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		rep, err := streams.Apply(ctx(t), js, cfg)
		if err != nil {
			t.Fatalf("Apply %d: %v\n%s", i, err, rep)
		}
		if c, ok := rep.Get("E2A_IDEMPOTENCY"); ok || strings.Contains(rep.String(), "IDEMPOTENCY") {
			t.Fatalf("Apply %d reported the bucket: %+v\n%s", i, c, rep)
		}
	}
	kv, err := js.KeyValue(ctx(t), "E2A_IDEMPOTENCY")
	if err != nil {
		t.Fatalf("bucket gone: %v", err)
	}
	if st, err := kv.Status(ctx(t)); err != nil || st.TTL() != 24*time.Hour {
		t.Fatalf("bucket changed: %v, %v", st, err)
	}
}

func TestApplyExtraKeyValue(t *testing.T) {
	_, _, js := startServer(t)
	cfg := testConfig()
	extra, err := cfg.KeyValueConfig("E2A_SESSIONS")
	if err != nil {
		t.Fatal(err)
	}
	extra.TTL = time.Hour
	rep, err := streams.Apply(ctx(t), js, cfg, streams.WithKeyValue(extra))
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := rep.Get("E2A_SESSIONS"); !ok || c.Action != streams.ActionCreated || c.Kind != streams.KindKeyValue {
		t.Fatalf("extra bucket: %+v", c)
	}
	rep, err = streams.Apply(ctx(t), js, cfg, streams.WithKeyValue(extra))
	if err != nil || rep.Changed() {
		t.Fatalf("second Apply: %v\n%s", err, rep)
	}
	kv, err := js.KeyValue(ctx(t), "E2A_SESSIONS")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx(t), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
}

// TestApplyExtraStream: WithStream provisions E2A_PUSH_DEAD beside the
// standard streams, leaves it alone the second time, updates it when its
// definition changes, and refuses a stream without subjects.
func TestApplyExtraStream(t *testing.T) {
	_, _, js := startServer(t)
	cfg := testConfig()
	dead := cfg.PushDeadStreamConfig()
	rep, err := streams.Apply(ctx(t), js, cfg, streams.WithStream(dead))
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := rep.Get(streams.PushDeadStream); !ok || c.Action != streams.ActionCreated || c.Kind != streams.KindStream {
		t.Fatalf("extra stream: %+v", c)
	}
	if rep, err = streams.Apply(ctx(t), js, cfg, streams.WithStream(dead)); err != nil || rep.Changed() {
		t.Fatalf("second Apply: %v\n%s", err, rep)
	}
	dead.MaxBytes /= 2
	if rep, err = streams.Apply(ctx(t), js, cfg, streams.WithStream(dead)); err != nil {
		t.Fatal(err)
	} else if c, _ := rep.Get(streams.PushDeadStream); c.Action != streams.ActionUpdated {
		t.Fatalf("changed MaxBytes: %+v", c)
	}
	if _, err := streams.Apply(ctx(t), js, cfg, streams.WithStream(jetstream.StreamConfig{Name: "NO_SUBJECTS"})); !errors.Is(err, streams.ErrInvalidOptions) {
		t.Fatalf("no subjects: %v", err)
	}
}

// TestRePublish checks the live subject carries what egress relies on.
func TestRePublish(t *testing.T) {
	_, nc, js := startApplied(t)
	id := "req.with dots"
	resp, _ := subjects.Response(id)
	live, _ := subjects.Live(id)
	sub, err := nc.SubscribeSync(live)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for i := range 3 {
		m := nats.NewMsg(resp)
		m.Header.Set(subjects.HeaderMsgID, subjects.FrameMsgID(id, int64(i)))
		m.Header.Set(subjects.HeaderRequestID, id)
		m.Data = []byte{byte('a' + i)}
		ack, err := js.PublishMsg(ctx(t), m)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
		// Something on another subject in between.
		other, _ := subjects.Response("other")
		if _, err := js.Publish(ctx(t), other, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		h := m.Header
		wantLast := "0"
		if i > 0 {
			wantLast = itoa(seqs[i-1])
		}
		if h.Get(subjects.HeaderStream) != streams.ResponsesStream || h.Get(subjects.HeaderSubject) != resp ||
			h.Get(subjects.HeaderStreamSequence) != itoa(seqs[i]) || h.Get(subjects.HeaderLastSequence) != wantLast ||
			h.Get(subjects.HeaderRequestID) != id || h.Get(subjects.HeaderTimeStamp) == "" || string(m.Data) != string(rune('a'+i)) {
			t.Fatalf("live message %d: %v %q", i, h, m.Data)
		}
	}
	// A retried frame is deduplicated and not republished.
	m := nats.NewMsg(resp)
	m.Header.Set(subjects.HeaderMsgID, subjects.FrameMsgID(id, 0))
	if ack, err := js.PublishMsg(ctx(t), m); err != nil || !ack.Duplicate {
		t.Fatalf("retry: %+v %v", ack, err)
	}
	if m, err := sub.NextMsg(100 * time.Millisecond); err == nil {
		t.Fatalf("duplicate republished: %v", m.Header)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func TestControlKeepsLast(t *testing.T) {
	_, nc, js := startApplied(t)
	ctl, _ := subjects.Control("r1")
	for _, v := range []string{"cancel-1", "cancel-2"} {
		if _, err := js.Publish(ctx(t), ctl, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := js.Stream(ctx(t), streams.ControlStream)
	info, _ := s.Info(ctx(t))
	if info.State.Msgs != 1 {
		t.Fatalf("control holds %d messages", info.State.Msgs)
	}
	m, err := streams.LastBySubject(ctx(t), nc, streams.ControlStream, ctl)
	if err != nil || string(m.Data) != "cancel-2" {
		t.Fatalf("LastBySubject: %+v %v", m, err)
	}
}

func TestRequestsBackpressure(t *testing.T) {
	_, _, js := startServer(t)
	cfg := testConfig()
	cfg.RequestsMaxBytes = 4096
	if _, err := streams.Apply(ctx(t), js, cfg); err != nil {
		t.Fatal(err)
	}
	subj, _ := subjects.Request("p", "r")
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = js.Publish(ctx(t), subj, make([]byte, 512), jetstream.WithMsgID(itoa(uint64(i))))
	}
	if err == nil || !strings.Contains(err.Error(), "maximum bytes") {
		t.Fatalf("full requests stream accepted publishes: %v", err)
	}
	s, _ := js.Stream(ctx(t), streams.RequestsStream)
	info, _ := s.Info(ctx(t))
	if info.State.FirstSeq != 1 {
		t.Fatalf("old requests dropped: first seq %d", info.State.FirstSeq)
	}
}

func TestAuditPartitions(t *testing.T) {
	_, nc, js := startApplied(t)
	ids := []string{"r1", "r.2", "", "日本"}
	for _, id := range ids {
		req, _ := subjects.Request("pool", id)
		m := nats.NewMsg(req)
		m.Header.Set(subjects.HeaderRequestID, id)
		m.Header.Set(subjects.HeaderMsgID, id)
		if _, err := js.PublishMsg(ctx(t), m); err != nil {
			t.Fatal(err)
		}
		resp, _ := subjects.Response(id)
		for i := range 2 {
			m := nats.NewMsg(resp)
			m.Header.Set(subjects.HeaderRequestID, id)
			m.Header.Set(subjects.HeaderMsgID, subjects.FrameMsgID(id, int64(i)))
			if _, err := js.PublishMsg(ctx(t), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, _ := js.Stream(ctx(t), streams.AuditStream)
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d audit messages", 3*len(ids)), func() bool {
		info, err := s.Info(ctx(t), jetstream.WithSubjectFilter(subjects.AllAudit))
		if err != nil {
			t.Fatal(err)
		}
		if len(info.State.Subjects) > 2*16 {
			t.Fatalf("unbounded audit subjects: %v", info.State.Subjects)
		}
		return info.State.Msgs == uint64(3*len(ids))
	})
	cfg := testConfig()
	for _, id := range ids {
		p, _ := subjects.AuditPartition(id, cfg.AuditPartitions)
		reqs, err := streams.DirectGetAll(ctx(t), nc, streams.AuditStream, subjects.AuditRequest(p), 0, 10)
		if err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		found := false
		for _, m := range reqs {
			if m.Header.Get(subjects.HeaderRequestID) == id {
				found = true
				orig, _ := subjects.Request("pool", id)
				if src := m.Header.Get(subjects.HeaderStreamSource); !strings.HasPrefix(src, streams.RequestsStream+" ") || !strings.Contains(src, orig) {
					t.Fatalf("source header %q", src)
				}
			}
		}
		frames, err := streams.DirectGetAll(ctx(t), nc, streams.AuditStream, subjects.AuditResponse(p), 0, 10)
		n := 0
		for _, m := range frames {
			if m.Header.Get(subjects.HeaderRequestID) == id {
				n++
			}
		}
		if !found || n != 2 || err != nil {
			t.Fatalf("%q in partition %d: request %v, %d frames, %v", id, p, found, n, err)
		}
	}
	// Append only.
	if err := s.Purge(ctx(t)); err == nil {
		t.Fatal("audit purged")
	}
	if err := s.DeleteMsg(ctx(t), 1); err == nil {
		t.Fatal("audit message deleted")
	}
}

// On one server E2A_AUDIT is written in async persist mode (its copies can
// be sourced again), replicated or in memory in the default mode; a stream
// created in the other mode keeps it (the mode is fixed at creation) and
// Apply does not fail on it.
func TestAuditPersistMode(t *testing.T) {
	cfg := testConfig()
	all, err := cfg.StreamConfigs()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		want := jetstream.DefaultPersistMode // the hot streams' messages are PubAck'd
		if s.Name == streams.AuditStream {
			want = jetstream.AsyncPersistMode
		}
		if s.PersistMode != want {
			t.Errorf("one server, file: %s in mode %v", s.Name, s.PersistMode)
		}
	}
	r3 := cfg
	r3.Replicas = 3
	mem := cfg
	mem.Storage = jetstream.MemoryStorage
	for _, c := range []streams.Config{r3, mem} {
		if m := c.AuditStreamConfig().PersistMode; m != jetstream.DefaultPersistMode {
			t.Errorf("replicas %d, %v: %v", c.Replicas, c.Storage, m)
		}
	}

	_, _, js := startServer(t)
	if _, err := streams.Apply(ctx(t), js, cfg); err != nil {
		t.Fatal(err)
	}
	if s, _ := js.Stream(ctx(t), streams.AuditStream); s.CachedInfo().Config.PersistMode != jetstream.AsyncPersistMode {
		t.Fatalf("created in mode %v", s.CachedInfo().Config.PersistMode)
	}

	// E2A_AUDIT as an earlier definition created it.
	_, _, js = startServer(t)
	old := cfg.AuditStreamConfig()
	old.PersistMode = jetstream.DefaultPersistMode
	if _, err := js.CreateStream(ctx(t), old); err != nil {
		t.Fatal(err)
	}
	rep, err := streams.Apply(ctx(t), js, cfg)
	if err != nil {
		t.Fatalf("Apply over the default mode: %v\n%s", err, rep)
	}
	if c, _ := rep.Get(streams.AuditStream); c.Action != streams.ActionUnchanged || len(c.Drift) != 0 {
		t.Fatalf("audit: %+v", c)
	}
	if s, _ := js.Stream(ctx(t), streams.AuditStream); s.CachedInfo().Config.PersistMode != jetstream.DefaultPersistMode {
		t.Fatalf("mode %v", s.CachedInfo().Config.PersistMode)
	}
}

// E2A_AUDIT created on one server of a cluster with one replica (async
// persist mode) cannot be replicated: Apply says so and what to do, and
// leaves it as it is.
func TestAuditAsyncNotReplicated(t *testing.T) {
	c := natstest.RunCluster(t, 3, natstest.WithoutStreams())
	nc := c.Connect()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	r1 := testConfig()
	if _, err := streams.Apply(ctx(t), js, r1); err != nil {
		t.Fatal(err)
	}
	r3 := r1
	r3.Replicas = 3
	rep, err := streams.Apply(ctx(t), js, r3)
	if !errors.Is(err, streams.ErrDriftNotUpdatable) {
		t.Fatalf("err %v\n%s", err, rep)
	}
	if a, _ := rep.Get(streams.AuditStream); a.Action != streams.ActionFailed || !strings.Contains(a.Err.Error(), "async persist mode") {
		t.Fatalf("audit: %+v", a)
	}
	for _, name := range []string{streams.RequestsStream, streams.ResponsesStream} {
		if s, _ := rep.Get(name); s.Action != streams.ActionUpdated {
			t.Errorf("%s: %+v", name, s)
		}
	}
	if s, _ := js.Stream(ctx(t), streams.AuditStream); s.CachedInfo().Config.Replicas != 1 {
		t.Fatalf("audit replicas %d", s.CachedInfo().Config.Replicas)
	}
}

// TestApplyWaitsForTheCluster: Apply on a cluster that has lost its meta
// leader (two of three nodes down, as while a cluster starts or elects)
// waits for it, reading the streams again, and provisions them once the
// nodes are back. Its first read failed the whole Apply ("stream
// E2A_REQUESTS: context deadline exceeded"), and every stage applies the
// streams at start-up: one that started in an election exited.
func TestApplyWaitsForTheCluster(t *testing.T) {
	c := natstest.RunCluster(t, 3, natstest.WithoutStreams())
	c.Kill(1)
	c.Kill(2)
	nc, err := nats.Connect(c.Node(0).ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	asked := natstest.CountOn(t, nc, "$JS.API.STREAM.INFO."+streams.RequestsStream)
	cfg := testConfig()
	cfg.Replicas = 3
	done := make(chan error, 1)
	go func() {
		actx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		rep, err := streams.Apply(actx, js, cfg)
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, rep)
		}
		done <- err
	}()
	testkit.Eventually(t, 30*time.Second, "Apply reading E2A_REQUESTS with no meta leader", func() bool {
		return asked.Count(t) >= 1
	})
	c.Restart(1, 2)
	if err := testkit.Receive(t, done, 60*time.Second, "Apply did not return"); err != nil {
		t.Fatalf("Apply once the cluster is back: %v", err)
	}
}
