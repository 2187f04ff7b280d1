package push_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// backup is a snapshot of E2A_RESPONSES as `nats stream backup` takes
// it through the server's API ($JS.API.STREAM.SNAPSHOT): its
// configuration, state and the chunks of its data, consumers included.
type backup struct {
	config, state json.RawMessage
	chunks        [][]byte
}

// backupResponses snapshots E2A_RESPONSES, with its consumers or
// without them (`nats stream backup --no-consumers`).
func backupResponses(t *testing.T, e *env, consumers bool) backup {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := e.nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	req, _ := json.Marshal(map[string]any{"deliver_subject": inbox, "chunk_size": 1024, "no_consumers": !consumers})
	resp, err := e.nc.Request("$JS.API.STREAM.SNAPSHOT."+streams.ResponsesStream, req, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var b backup
	var r struct {
		Config json.RawMessage `json:"config"`
		State  json.RawMessage `json:"state"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil || r.Error != nil {
		t.Fatalf("snapshot: %v %s", err, resp.Data)
	}
	b.config, b.state = r.Config, r.State
	for {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("snapshot chunk: %v", err)
		}
		if len(m.Data) == 0 { // the end: no status, or 204, when it succeeded
			if st := m.Header.Get("Status"); st != "" && st != "204" {
				t.Fatalf("snapshot ended with status %s %s", st, m.Header.Get("Description"))
			}
			return b
		}
		b.chunks = append(b.chunks, m.Data)
		if m.Reply != "" {
			_ = m.Respond(nil)
		}
	}
}

// backupResponsesV1 is a backup of E2A_RESPONSES in the format of
// nats-server before 2.15 (its fileStore.streamSnapshot, which 2.15
// still restores): an S2-compressed tar of the stream's directory, the
// stream's meta.inf (its configuration and creation time) and meta.sum
// first, then its message blocks, without consumers (nor index.db: the
// restore rebuilds the state from the blocks). It is made from the
// files the embedded server wrote (a server of one replica writes each
// message to its block before acknowledging it).
func backupResponsesV1(t *testing.T, e *env) backup {
	t.Helper()
	dir := filepath.Join(e.srv.StoreDir(), "jetstream", "$G", "streams", streams.ResponsesStream)
	var buf bytes.Buffer
	enc := s2.NewWriter(&buf)
	tw := tar.NewWriter(enc)
	blocks, err := filepath.Glob(filepath.Join(dir, "msgs", "*.blk"))
	if err != nil {
		t.Fatal(err)
	}
	var b backup
	for _, f := range append([]string{filepath.Join(dir, "meta.inf"), filepath.Join(dir, "meta.sum")}, blocks...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(dir, f)
		h := &tar.Header{Name: filepath.ToSlash(name), Mode: 0o600, Size: int64(len(data)), Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
		if name == "meta.inf" { // the stream's configuration and "Created"
			var cfg map[string]json.RawMessage
			if err := json.Unmarshal(data, &cfg); err != nil {
				t.Fatal(err)
			}
			delete(cfg, "Created")
			b.config, _ = json.Marshal(cfg)
		}
	}
	if err := errors.Join(tw.Close(), enc.Close()); err != nil {
		t.Fatal(err)
	}
	for c := range slices.Chunk(buf.Bytes(), 1024) {
		b.chunks = append(b.chunks, c)
	}
	return b
}

// restoreResponses removes E2A_RESPONSES and restores b in its place
// ($JS.API.STREAM.RESTORE, as `nats stream restore`): its sequences go
// back to the backup's.
func restoreResponses(t *testing.T, e *env, b backup) {
	t.Helper()
	if err := e.js.DeleteStream(tctx(t), streams.ResponsesStream); err != nil {
		t.Fatal(err)
	}
	req, _ := json.Marshal(map[string]json.RawMessage{"config": b.config, "state": b.state})
	resp, err := e.nc.Request("$JS.API.STREAM.RESTORE."+streams.ResponsesStream, req, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		DeliverSubject string          `json:"deliver_subject"`
		Error          json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil || r.Error != nil {
		t.Fatalf("restore: %v %s", err, resp.Data)
	}
	for _, c := range b.chunks {
		if _, err := e.nc.Request(r.DeliverSubject, c, 10*time.Second); err != nil {
			t.Fatalf("restore chunk: %v", err)
		}
	}
	end, err := e.nc.Request(r.DeliverSubject, nil, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var done struct {
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(end.Data, &done); err != nil || done.Error != nil {
		t.Fatalf("restore: %v %s", err, end.Data)
	}
}

// TestRestoredBackupRebasesPositions: E2A_RESPONSES restored from a
// backup (the server's snapshot and restore, as `nats stream backup` and
// `nats stream restore`) numbers its messages from the backup's last
// sequence again. Alice's cursor stood on her turn stored after the
// backup and bob's config was made after it (its From beyond the restored
// stream's last sequence): alice's next turn and bob's first, stored at
// those sequences again, would be taken for handled or for stored before
// the config, and acked undelivered. nats-server 2.15's snapshots carry
// no creation time: the restored stream has a new StreamInfo.Created, and
// the positions past its restored messages count as at the restore point
// (cursor.restoredIn, Config.fromIn): every update is delivered, none
// twice. A backup in the format of earlier servers (backupResponsesV1),
// restored, keeps its Created: the stream went back under the positions
// written after the backup, which the stage finds when a message stored
// later than a position's message comes at a sequence not after it
// (streamEpoch.rewound); those positions count as at the restore point
// too. (Before, they were taken as the restored stream's: alice's and
// bob's updates were acked undelivered.)
func TestRestoredBackupRebasesPositions(t *testing.T) {
	t.Run("2.15 snapshot", func(t *testing.T) {
		restoredBackupRebasesPositions(t, func(t *testing.T, e *env) backup { return backupResponses(t, e, true) }, false)
	})
	t.Run("pre-2.15 tar", func(t *testing.T) { restoredBackupRebasesPositions(t, backupResponsesV1, true) })
}

// restoredBackupRebasesPositions runs TestRestoredBackupRebasesPositions
// with the backup backupOf takes, whose restore keeps the stream's
// creation time or not (keepsCreated).
func restoredBackupRebasesPositions(t *testing.T, backupOf func(*testing.T, *env) backup, keepsCreated bool) {
	e := newEnvOn(t)
	e.startStage()
	alice, bob := newReceiver(t, nil), newReceiver(t, nil)
	defer e.logOnFailure(t)
	padResponses(t, e, 5)
	e.create("alice", push.Config{TaskID: "ta", URL: alice.srv.URL})
	testkit.Eventually(t, 20*time.Second, "the padding acked", func() bool { return consumerIdle(t, e) })
	b := backupOf(t, e)

	storeTurn(t, e, "ta-r1", "ta", "", "a1;")
	e.handled("alice", "ta", alice)
	padResponses(t, e, 10)
	e.create("bob", push.Config{TaskID: "tb", URL: bob.srv.URL})
	testkit.Eventually(t, 20*time.Second, "the padding acked", func() bool { return consumerIdle(t, e) })
	before := storedIn(t, e, streams.ResponsesStream)
	was, err := e.js.Stream(tctx(t), streams.ResponsesStream)
	if err != nil {
		t.Fatal(err)
	}

	restoreResponses(t, e, b)
	st, err := e.js.Stream(tctx(t), streams.ResponsesStream)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restored: created %v (was %v), last sequence %d (was %d)", st.CachedInfo().Created, was.CachedInfo().Created,
		st.CachedInfo().State.LastSeq, before)
	if kept := st.CachedInfo().Created.Equal(was.CachedInfo().Created); kept != keepsCreated {
		t.Fatalf("the restored stream kept its creation time: %v, want %v (nothing to reproduce)", kept, keepsCreated)
	}
	if last := st.CachedInfo().State.LastSeq; last >= before {
		t.Fatalf("restored stream's last sequence %d, was %d: nothing to reproduce", last, before)
	}
	storeTurn(t, e, "ta-r2", "ta", "ta-r1", "a2;")
	storeRequestAfter(t, e, "tb-r1", "bob", "tb", "")
	storeFrame(t, e, "tb-r1", "bob", "tb", 0, "b1;", false)
	storeFrame(t, e, "tb-r1", "bob", "tb", 1, "", true)
	testkit.Eventually(t, 30*time.Second, "alice's second turn and bob's first completed", func() bool {
		return completedBy(t, alice)["ta-r2"] && completedBy(t, bob)["tb-r1"]
	})
	ordered(t, push.V1, alice.accepted(), []string{"ta-r1", "ta-r2"}, "a1;a2;")
	ordered(t, push.V1, bob.accepted(), []string{"tb-r1"}, "b1;")
	sentOnce(t, alice, bob)
}

// sentOnce fails t for every update one of rs accepted twice.
func sentOnce(t *testing.T, rs ...*receiver) {
	t.Helper()
	for _, r := range rs {
		seen := map[string]bool{}
		for _, d := range r.accepted() {
			if seen[d.eventID] {
				t.Errorf("update %s delivered twice", d.eventID)
			}
			seen[d.eventID] = true
		}
	}
}

// TestRestoreWithoutConsumersSendsNothingTwice: E2A_RESPONSES restored
// from a backup taken without its consumers (`nats stream backup
// --no-consumers`) has no push consumer, and the stage makes a new one,
// which starts at the first message any config may wait for. Ta's turn
// and tb's first were delivered before the backup, tb's second after it
// (its cursor past the restore point). The restored messages are the
// ones the cursors passed, at the same sequences: none is sent again, and
// the turns stored after the restore are. (Before, the restored stream
// counted as made again: the consumer started at its first message, the
// cursors started again, and ta-r1's and tb-r1's updates were sent twice.)
func TestRestoreWithoutConsumersSendsNothingTwice(t *testing.T) {
	e := newEnvOn(t)
	e.startStage()
	ra, rb := newReceiver(t, nil), newReceiver(t, nil)
	defer e.logOnFailure(t)
	e.create("alice", push.Config{TaskID: "ta", URL: ra.srv.URL})
	e.create("alice", push.Config{TaskID: "tb", URL: rb.srv.URL})
	storeTurn(t, e, "ta-r1", "ta", "", "a1;")
	storeTurn(t, e, "tb-r1", "tb", "", "b1;")
	e.handled("alice", "ta", ra)
	e.handled("alice", "tb", rb)
	b := backupResponses(t, e, false)

	storeTurn(t, e, "tb-r2", "tb", "tb-r1", "b2;")
	testkit.Eventually(t, 20*time.Second, "tb's second turn handled", func() bool {
		ds, err := e.store.Deliveries(tctx(t), "alice", "tb")
		return err == nil && len(ds) == 1 && strings.HasPrefix(ds[0].LastEvent, "tb-r2:1:")
	})
	restoreResponses(t, e, b)
	storeTurn(t, e, "ta-r2", "ta", "ta-r1", "a2;")
	storeTurn(t, e, "tb-r3", "tb", "tb-r2", "b3;")
	testkit.Eventually(t, 30*time.Second, "the turns stored after the restore completed", func() bool {
		return completedBy(t, ra)["ta-r2"] && completedBy(t, rb)["tb-r3"]
	})
	sentOnce(t, ra, rb)
	ordered(t, push.V1, ra.accepted(), []string{"ta-r1", "ta-r2"}, "a1;a2;")
	ordered(t, push.V1, rb.accepted(), []string{"tb-r1", "tb-r2", "tb-r3"}, "b1;b2;b3;")
}

// TestPre215RestoreWhileStoppedDelivers: E2A_RESPONSES restored from a
// backup in the format of servers before 2.15 (its creation time kept,
// no consumers) while the stage was stopped, and bob's first turn stored
// before the stage starts again. Bob's config was made after the backup:
// its From is past the restored stream's last message and past bob's
// turn. The stage's new consumer starts at the first message stored after
// the oldest config's From was (Config.FromAt), and bob's turn, stored
// later than that at sequences not after From, shows the stream went
// back (no cursor does here: stage.fromBack), so it is delivered.
// (Before, the consumer started after min(From, the stream's last
// sequence): bob's turn, stored before that, was never read; read, it
// would have been taken for stored before the config.)
func TestPre215RestoreWhileStoppedDelivers(t *testing.T) {
	e := newEnvOn(t)
	first := e.startStage()
	bob := newReceiver(t, nil)
	defer e.logOnFailure(t)
	padResponses(t, e, 5)
	b := backupResponsesV1(t, e)
	padResponses(t, e, 10)
	e.create("bob", push.Config{TaskID: "tb", URL: bob.srv.URL})
	testkit.Eventually(t, 20*time.Second, "the padding acked", func() bool { return consumerIdle(t, e) })
	first.stop()

	restoreResponses(t, e, b)
	storeRequestAfter(t, e, "tb-r1", "bob", "tb", "")
	storeFrame(t, e, "tb-r1", "bob", "tb", 0, "b1;", false)
	storeFrame(t, e, "tb-r1", "bob", "tb", 1, "", true)
	e.startStage()
	testkit.Eventually(t, 30*time.Second, "bob's first turn completed", func() bool { return completedBy(t, bob)["tb-r1"] })
	ordered(t, push.V1, bob.accepted(), []string{"tb-r1"}, "b1;")
	sentOnce(t, bob)
}
