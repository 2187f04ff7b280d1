package ingress

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// TestTaskStoreLeaderValue: the confirmation TaskStore.Get asks of the
// bucket's leader when a direct get finds no record (a replica may lag one
// just created) reads the record, and nothing for a key never written,
// deleted or purged; Get then reports ErrTaskNotFound for those.
func TestTaskStoreLeaderValue(t *testing.T) {
	ctx := context.Background()
	ts, _ := newTaskStore(t)
	for _, id := range []string{"kept", "deleted", "purged"} {
		key, _ := taskKey(KindSession, id)
		if err := ts.create(ctx, key, []byte(`{"id":"`+id+`","principal":"alice"}`)); err != nil {
			t.Fatal(err)
		}
	}
	kept, _ := taskKey(KindSession, "kept")
	if v, err := ts.leaderValue(ctx, kept); err != nil || string(v) != `{"id":"kept","principal":"alice"}` {
		t.Fatalf("leader value of a stored record: %q %v", v, err)
	}
	deleted, _ := taskKey(KindSession, "deleted")
	purged, _ := taskKey(KindSession, "purged")
	if err := ts.kv.Delete(ctx, deleted); err != nil {
		t.Fatal(err)
	}
	if err := ts.kv.Purge(ctx, purged); err != nil {
		t.Fatal(err)
	}
	never, _ := taskKey(KindSession, "never")
	for _, key := range []string{deleted, purged, never} {
		if v, err := ts.leaderValue(ctx, key); err != nil || v != nil {
			t.Errorf("leader value of %s: %q %v, want none", key, v, err)
		}
		if _, err := ts.kv.Get(ctx, key); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("direct get of %s: %v", key, err)
		}
	}
	for _, id := range []string{"deleted", "purged", "never"} {
		if _, err := ts.Get(ctx, KindSession, id); !errors.Is(err, ErrTaskNotFound) {
			t.Errorf("Get %s: %v, want ErrTaskNotFound", id, err)
		}
	}
	if rec, err := ts.Get(ctx, KindSession, "kept"); err != nil || rec.Principal != "alice" {
		t.Errorf("Get kept: %+v %v", rec, err)
	}
}

// BenchmarkListTasks: one listing of the tasks (listTasks, what a v1.0
// ListTasks call reads) on a store of 10,000 one-turn A2A tasks, each an
// envelope of about 900 bytes in E2A_REQUESTS that stands for its task's
// record (no record in E2A_TASKS): "first", the replica's first listing,
// which reads the newest ListMax (10,000) requests in direct-get batches
// and decodes them; "next", a listing after it, which reads only what was
// stored since (nothing here).
func BenchmarkListTasks(b *testing.B) {
	ctx := context.Background()
	ts, js := newTaskStore(b)
	const n = 10_000
	for i := range n {
		publishFirstTurn(b, js, fmt.Sprintf("task-%05d", i), []string{"alice", "bob"}[i%2], strings.Repeat("x", 500))
	}
	testkit.Receive(b, js.PublishAsyncComplete(), 30*time.Second, "publishes not acknowledged")
	list := func() {
		got := 0
		if _, err := ts.listTasks(ctx, n, anyOwner, func(r *TaskRecord) bool {
			if r.Principal == "alice" {
				got++
			}
			return false
		}); err != nil {
			b.Fatal(err)
		}
		if got != n/2 {
			b.Fatalf("listed %d of alice's tasks, want %d", got, n/2)
		}
	}
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ts.turns = firstTurns{} // every listing reads all the requests
			list()
		}
	})
	b.Run("next", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			list() // the requests read by the one before are not read again
		}
	})
}

// publishFirstTurn stores, without waiting for its acknowledgement, the
// envelope of an A2A request of user that created the task named by its
// own id (a one-turn task: the request stands for the record).
func publishFirstTurn(t testing.TB, js jetstream.JetStream, id, user, text string) {
	t.Helper()
	subj, _ := subjects.Request("demo", id)
	env := fmt.Sprintf(`{"request_id":%q,"task_id":%q,"context_id":"ctx-%s","user_id":%q,"method":"message/send","params":{"text":%q},`+
		`"provenance":{"source_protocol":"a2a","details":{"task_created":true}}}`, id, id, id, user, text)
	if _, err := js.PublishAsync(subj, []byte(env)); err != nil {
		t.Fatal(err)
	}
}

// TestFirstTurnsCache: a listing lists the one-turn tasks among the newest
// window requests, reading those stored since the listing before it; a
// request that created no task is not listed, one older than the window
// or than E2A_REQUESTS' max age is dropped, and a task that has a record
// in E2A_TASKS is listed once, from its record.
func TestFirstTurnsCache(t *testing.T) {
	ctx := context.Background()
	ts, js := newTaskStore(t)
	if ts.turns.maxAge <= 0 {
		t.Fatalf("E2A_REQUESTS' max age not read: %v", ts.turns.maxAge)
	}
	wait := func() {
		t.Helper()
		testkit.Receive(t, js.PublishAsyncComplete(), 10*time.Second, "publishes not acknowledged")
	}
	list := func(window int) []string {
		t.Helper()
		var ids []string
		if _, err := ts.listTasks(ctx, window, anyOwner, func(r *TaskRecord) bool {
			ids = append(ids, r.ID+"/"+r.Principal+"/"+r.Protocol)
			return false
		}); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	publishFirstTurn(t, js, "t1", "alice", "a")
	publishFirstTurn(t, js, "t2", "bob", "b")
	wait()
	if got := strings.Join(list(100), " "); got != "t1/alice/a2a t2/bob/a2a" {
		t.Fatalf("first listing: %s", got)
	}
	// A request that created no task, then a third task.
	subj, _ := subjects.Request("demo", "plain")
	if _, err := js.Publish(ctx, subj, []byte(`{"request_id":"plain","user_id":"alice","method":"m"}`)); err != nil {
		t.Fatal(err)
	}
	publishFirstTurn(t, js, "t3", "alice", "c")
	wait()
	if got := strings.Join(list(100), " "); got != "t1/alice/a2a t2/bob/a2a t3/alice/a2a" || ts.turns.last != 4 {
		t.Fatalf("second listing: %s (read up to %d)", got, ts.turns.last)
	}
	// t1 gets a second turn: its record in E2A_TASKS is listed, once.
	if _, err := ts.Append(ctx, KindTask, TaskRecord{ID: "t1", Protocol: "a2a", Pool: "demo", Principal: "alice"}, "t1-turn2", tenant.Principal{ID: "alice"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(list(100), " "); got != "t1/alice/a2a t2/bob/a2a t3/alice/a2a" {
		t.Fatalf("listing after t1's second turn: %s", got)
	}
	// The window: the newest 2 requests (plain, t3); then a wider one
	// again, which reads t2 again.
	if got := strings.Join(list(2), " "); got != "t1/alice/a2a t3/alice/a2a" {
		t.Fatalf("listing of the newest 2 requests (t1 from its record): %s", got)
	}
	if got := strings.Join(list(100), " "); got != "t1/alice/a2a t2/bob/a2a t3/alice/a2a" {
		t.Fatalf("listing of the newest 100 after the newest 2: %s", got)
	}
	// Past E2A_REQUESTS' max age, the stream holds none of them.
	ts.now = func() time.Time { return time.Now().Add(ts.turns.maxAge + time.Minute) }
	if got := strings.Join(list(100), " "); got != "t1/alice/a2a" {
		t.Fatalf("listing past the max age (t1 from its record): %s", got)
	}
}

// newTaskStore is a task store on an embedded server of the test's, and
// the server's JetStream.
func newTaskStore(t testing.TB) (*TaskStore, jetstream.JetStream) {
	t.Helper()
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	ts, err := NewTaskStore(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	return ts, js
}

// NewTestTaskStore is newTaskStore for the package's external tests.
var NewTestTaskStore = newTaskStore

// TestFirstTurnsConcurrent: listings of one replica running at once, each
// reading without the cache's lock, all list every one-turn task; the
// cache then holds each once.
func TestFirstTurnsConcurrent(t *testing.T) {
	ctx := context.Background()
	ts, js := newTaskStore(t)
	const n = 300
	for i := range n {
		publishFirstTurn(t, js, fmt.Sprintf("c-%03d", i), "alice", "x")
	}
	testkit.Receive(t, js.PublishAsyncComplete(), 10*time.Second, "publishes not acknowledged")
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			seen := map[string]int{}
			_, err := ts.listTasks(ctx, 1000, anyOwner, func(r *TaskRecord) bool { seen[r.ID]++; return false })
			if err == nil && len(seen) != n {
				err = fmt.Errorf("listed %d tasks, want %d", len(seen), n)
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := len(ts.turns.recs); got != n {
		t.Errorf("the cache holds %d entries for %d tasks", got, n)
	}
}

// TestAppendAfterCancelTurn: the record marks the cancel turn it takes
// (TaskRecord.CancelTurn). While it is the newest request an A2A turn
// (turnCond.open) is refused as to a task in a terminal state and nothing
// is written, whenever that turn checked the task before: the refusal is
// made on the revision the write is conditioned on. A retry of the cancel
// turn is no new turn; an AgentVault turn (no open condition: it continues
// a task whatever its state) follows it, and the task then takes A2A turns
// again. A cancel turn appended to a task without a record (named by its
// first request) is marked too, and one removed (its publish failed) no
// longer counts.
func TestAppendAfterCancelTurn(t *testing.T) {
	ctx := context.Background()
	ts, js := newTaskStore(t)
	alice := tenant.Principal{ID: "alice"}
	a2a := TaskRecord{ID: "t-1", Protocol: "a2a", Pool: "demo", Principal: "alice"}
	vault := a2a
	vault.Protocol = "agentvault"
	open := turnCond{open: true}
	ids := func(id string) string {
		t.Helper()
		rec, err := ts.Get(ctx, KindTask, id)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(rec.RequestIDs, " ") + " cancel:" + rec.CancelTurn
	}
	appendTurn := func(base TaskRecord, id string, cond turnCond) error {
		t.Helper()
		_, _, err := ts.appendAfter(ctx, KindTask, base, id, alice, cond)
		return err
	}

	if _, err := ts.AppendNew(ctx, KindTask, a2a, "ask", alice); err != nil {
		t.Fatal(err)
	}
	if err := appendTurn(a2a, "cancel", turnCond{after: "ask", cancel: true}); err != nil {
		t.Fatalf("the cancel turn: %v", err)
	}
	if err := appendTurn(a2a, "answer", open); !errors.Is(err, ErrTaskTerminal) {
		t.Errorf("an A2A turn after the cancel turn: %v, want ErrTaskTerminal", err)
	}
	if err := appendTurn(a2a, "cancel", turnCond{after: "ask", cancel: true}); err != nil {
		t.Errorf("a retry of the cancel turn: %v", err)
	}
	if got := ids("t-1"); got != "ask cancel cancel:cancel" {
		t.Errorf("record %q, want the cancel turn last and marked", got)
	}
	if err := appendTurn(vault, "vault", turnCond{}); err != nil {
		t.Errorf("an AgentVault turn after the cancel turn: %v", err)
	}
	if err := appendTurn(a2a, "answer", open); err != nil {
		t.Errorf("an A2A turn after a turn that followed the cancel turn: %v", err)
	}
	if got := ids("t-1"); got != "ask cancel vault answer cancel:cancel" {
		t.Errorf("record %q", got)
	}

	publishFirstTurn(t, js, "t-2", "alice", "ask")
	testkit.Receive(t, js.PublishAsyncComplete(), 10*time.Second, "publishes not acknowledged")
	first := TaskRecord{ID: "t-2", Protocol: "a2a", Pool: "demo", Principal: "alice"}
	if err := appendTurn(first, "cancel-2", turnCond{after: "t-2", cancel: true}); err != nil {
		t.Fatalf("the cancel turn of a task without a record: %v", err)
	}
	if err := appendTurn(first, "answer-2", open); !errors.Is(err, ErrTaskTerminal) {
		t.Errorf("an A2A turn after the cancel turn of a task that had no record: %v, want ErrTaskTerminal", err)
	}
	if err := ts.Remove(ctx, KindTask, "t-2", "cancel-2"); err != nil {
		t.Fatal(err)
	}
	if err := appendTurn(first, "answer-2", open); err != nil {
		t.Errorf("an A2A turn once the cancel turn was removed: %v", err)
	}
	if got := ids("t-2"); got != "t-2 answer-2 cancel:" {
		t.Errorf("record %q", got)
	}
}

// TestTurnOwnerOfAnAdminsTask: a task an admin (ops) started in alice's
// A2A context is alice's conversation in every turn: its first turn names
// her (the context's claim), and its later turns the record's owner, which
// the first turn's stored envelope gives (firstTurnRecord); the context's
// claim is not read again. Any other task's later turns name its principal.
func TestTurnOwnerOfAnAdminsTask(t *testing.T) {
	first := func(user, owner string) *TaskRecord {
		t.Helper()
		details := `"task_created":true,"ingress_protocol":"a2a"`
		if owner != "" {
			details += `,"conversation_owner":"` + owner + `"`
		}
		rec, ok := firstTurnRecord(streams.RawMsg{Subject: "e2a.req.demo.t-1", Time: time.Now(),
			Data: []byte(`{"request_id":"t-1","task_id":"t-1","context_id":"c-1","user_id":"` + user + `","provenance":{"source_protocol":"a2a","details":{` + details + `}}}`)})
		if !ok {
			t.Fatal("not read as a task's first turn")
		}
		return rec
	}
	admins := first("ops", "alice")
	if admins.Principal != "ops" || admins.Owner != "alice" {
		t.Fatalf("the admin's task record: principal %q owner %q, want ops, alice", admins.Principal, admins.Owner)
	}
	if got := turnOwner(KindTask, host.Turn{Created: true}, admins, "alice"); got != "alice" {
		t.Errorf("its first turn's owner %q, want alice", got)
	}
	if got := turnOwner(KindTask, host.Turn{}, admins, ""); got != "alice" {
		t.Errorf("its later turn's owner %q, want alice", got)
	}
	own := first("alice", "")
	if own.Owner != "" {
		t.Errorf("alice's own task has owner %q, want none", own.Owner)
	}
	// The owner is the key e2a.Envelope.Owner reads, exactly: another
	// spelling of it names nobody (encoding/json matched it to the
	// probe's field whatever its case).
	rec, ok := firstTurnRecord(streams.RawMsg{Subject: "e2a.req.demo.t-1", Time: time.Now(),
		Data: []byte(`{"request_id":"t-1","task_id":"t-1","user_id":"bob","provenance":{"source_protocol":"a2a","details":{"task_created":true,"Conversation_Owner":"alice"}}}`)})
	if !ok || rec.Owner != "" || rec.Principal != "bob" {
		t.Errorf("a first turn naming its owner under another spelling: %+v %v, want bob's record, no owner", rec, ok)
	}
	if got := turnOwner(KindTask, host.Turn{}, own, ""); got != "alice" {
		t.Errorf("alice's own task's later turn's owner %q, want alice", got)
	}
	if got := turnOwner(KindSession, host.Turn{}, &TaskRecord{Principal: "bob"}, ""); got != "bob" {
		t.Errorf("a session's turn's owner %q, want bob", got)
	}
}

// TestRecordDropsOldestCounted: a task of more turns than the record
// keeps lists the newest MaxRequestsPerTask and counts those it dropped
// (TaskRecord.Dropped, host.Session.Dropped), so that a read of it says
// its history is not whole (MetaHistoryExpired) instead of leaving the
// oldest turns out silently.
func TestRecordDropsOldestCounted(t *testing.T) {
	ctx := context.Background()
	ts, _ := newTaskStore(t)
	alice := tenant.Principal{ID: "alice"}
	base := TaskRecord{ID: "long-task", Protocol: "a2a", Pool: "demo", Principal: "alice"}
	const n = MaxRequestsPerTask + 4
	for i := range n {
		if _, err := ts.Append(ctx, KindTask, base, fmt.Sprintf("turn-%03d", i), alice); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := ts.Get(ctx, KindTask, "long-task")
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.RequestIDs) != MaxRequestsPerTask || rec.RequestIDs[0] != "turn-004" || rec.Dropped != 4 {
		t.Fatalf("record of %d turns: %d listed from %s, %d dropped; want %d from turn-004, 4 dropped",
			n, len(rec.RequestIDs), rec.RequestIDs[0], rec.Dropped, MaxRequestsPerTask)
	}
	if s := (Principal{UserID: "alice"}).session(rec); s.Dropped != 4 {
		t.Errorf("the record's session: %d dropped, want 4", s.Dropped)
	}
}

// TestTaskStoreReplyInboxAtStart: the task store subscribes the reply
// inbox of its direct gets (TaskStore.laterTurn, the read every streamed
// turn pays at its end) when it is made, so no read adds a subscription
// to the connection. It was made on the first read: the subscription
// count of the pipeline's connection then grew by one at some stream's
// end, which TestClientGoneReleasesEverything's baseline took for a leak
// whenever its warm-up had not reached one.
func TestTaskStoreReplyInboxAtStart(t *testing.T) {
	ts, js := newTaskStore(t)
	readsKeepSubscriptions(t, ts, js.Conn(), func(ctx context.Context, id string) (string, error) {
		next, _, err := ts.laterTurn(ctx, KindTask, id, "r-1")
		return next, err
	})
}

// TestTaskTurnsReplyInboxAtStart: TaskTurns (the push stage's read at a
// turn's end that ends its task) subscribes the reply inbox of its direct
// gets when it is made (NewTaskTurns), as the task store does, so no read
// adds a subscription to the connection.
func TestTaskTurnsReplyInboxAtStart(t *testing.T) {
	ts, js := newTaskStore(t)
	tt, err := NewTaskTurns(js.Conn())
	if err != nil {
		t.Fatal(err)
	}
	readsKeepSubscriptions(t, ts, js.Conn(), func(ctx context.Context, id string) (string, error) {
		return tt.LaterTurn(ctx, id, "r-1")
	})
}

// readsKeepSubscriptions records task t-1 with one turn, r-1, in ts, then
// reads with read the turn after r-1 of t-1 and of t-none (no record):
// none for both, and nc's subscription count as it was before the reads.
func readsKeepSubscriptions(t *testing.T, ts *TaskStore, nc *nats.Conn, read func(ctx context.Context, id string) (string, error)) {
	t.Helper()
	ctx := context.Background()
	if _, err := ts.AppendNew(ctx, KindTask, TaskRecord{ID: "t-1", Protocol: "a2a"}, "r-1", tenant.Principal{}); err != nil {
		t.Fatal(err)
	}
	before := nc.NumSubscriptions()
	for _, id := range []string{"t-1", "t-none"} {
		if next, err := read(ctx, id); next != "" || err != nil {
			t.Fatalf("the read of %s: %q, %v; want none", id, next, err)
		}
	}
	if after := nc.NumSubscriptions(); after != before {
		t.Errorf("the first reads took the connection from %d subscriptions to %d; want the reply inbox made with the reader", before, after)
	}
}
