package push_test

import (
	"encoding/json"
	"testing"
	"time"

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

// backupResponses snapshots E2A_RESPONSES.
func backupResponses(t *testing.T, e *env) backup {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := e.nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	req, _ := json.Marshal(map[string]any{"deliver_subject": inbox, "chunk_size": 1024})
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
// no creation time: the restored stream has a new StreamInfo.Created, so
// the positions count as of a stream made again (cursor.inStream,
// Config.fromIn) and every update is delivered, none twice. (A backup in
// the format of earlier servers, restored, keeps its Created: not
// covered, see rebind.go.)
func TestRestoredBackupRebasesPositions(t *testing.T) {
	e := newEnvOn(t)
	e.startStage()
	alice, bob := newReceiver(t, nil), newReceiver(t, nil)
	defer func() {
		if t.Failed() {
			t.Logf("log:\n%s", e.log.String())
		}
	}()
	padResponses(t, e, 5)
	e.create("alice", push.Config{TaskID: "ta", URL: alice.srv.URL})
	testkit.Eventually(t, 20*time.Second, "the padding acked", func() bool { return consumerIdle(t, e) })
	b := backupResponses(t, e)

	storeTurn(t, e, "ta-r1", "ta", "", "a1;")
	e.handled("alice", "ta", alice)
	padResponses(t, e, 10)
	e.create("bob", push.Config{TaskID: "tb", URL: bob.srv.URL})
	testkit.Eventually(t, 20*time.Second, "the padding acked", func() bool { return consumerIdle(t, e) })
	before := storedIn(t, e, streams.ResponsesStream)

	restoreResponses(t, e, b)
	st, err := e.js.Stream(tctx(t), streams.ResponsesStream)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restored: created %v, last sequence %d (was %d)", st.CachedInfo().Created, st.CachedInfo().State.LastSeq, before)
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
	for _, r := range []*receiver{alice, bob} {
		seen := map[string]bool{}
		for _, d := range r.accepted() {
			if seen[d.eventID] {
				t.Errorf("update %s delivered twice", d.eventID)
			}
			seen[d.eventID] = true
		}
	}
}
