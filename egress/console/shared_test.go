package console_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// bucketOf is the index's bucket of an id (the first 3 hex digits of its
// SHA-256), restated to pin the layout of the shared subjects.
func bucketOf(v string) string {
	h := sha256.Sum256([]byte(v))
	return hex.EncodeToString(h[:])[:3]
}

// collide returns two distinct values of the form prefix<n> in one bucket.
func collide(prefix string) (string, string) {
	seen := map[string]string{}
	for i := 0; ; i++ {
		v := fmt.Sprintf("%s%d", prefix, i)
		b := bucketOf(v)
		if w, ok := seen[b]; ok {
			return w, v
		}
		seen[b] = v
	}
}

// entryIDs lists the request ids of every page of q.
func entryIDs(t *testing.T, con *console.Console, q console.Query) []string {
	t.Helper()
	var out []string
	for {
		pg, err := con.List(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range pg.Entries {
			out = append(out, e.RequestID)
		}
		if pg.Next == 0 {
			return out
		}
		q.Before = pg.Next
	}
}

// TestIndexSharedBuckets: two users, two tasks, two contexts and two
// sessions whose ids fall in one bucket each share the index's subjects;
// a search by one never shows the other's requests (a user's search is
// the console's ownership rule: the API sets it to the caller), pages of
// 3 walk them in order, and the index holds a handful of subjects for 60
// requests.
func TestIndexSharedBuckets(t *testing.T) {
	p := startPipeline(t, pipelineOptions{noAgent: true})
	u1, u2 := collide("user-")
	t1, t2 := collide("task-")
	c1, c2 := collide("ctx-")
	s1, s2 := collide("sess-")
	const n = 60
	ids := publishRequests(t, p.nc, "idle", n, func(i int) string {
		u, tk, c, s := u1, t1, c1, s1
		if i%2 == 1 {
			u, tk, c, s = u2, t2, c2, s2
		}
		return fmt.Sprintf(`{"request_id":"bulk-%04d","user_id":%q,"task_id":%q,"context_id":%q,"session_id":%q,"params":{}}`, i, u, tk, c, s)
	})
	waitIndexed(t, p, ids...)
	var even, odd []string
	for i := n - 1; i >= 0; i-- {
		if i%2 == 0 {
			even = append(even, ids[i])
		} else {
			odd = append(odd, ids[i])
		}
	}
	for _, tc := range []struct {
		name string
		q    console.Query
		want []string
	}{
		{"user " + u1, console.Query{User: u1}, even},
		{"user " + u2, console.Query{User: u2}, odd},
		{"task " + t2, console.Query{TaskID: t2}, odd},
		{"context " + c1, console.Query{ContextID: c1}, even},
		{"session " + s2, console.Query{SessionID: s2}, odd},
		{"task of u1 as u2", console.Query{TaskID: t1, User: u2}, nil},
		{"a user no one is", console.Query{User: "nobody"}, nil},
	} {
		tc.q.Limit = 3
		if got := entryIDs(t, p.con, tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	js := natstest.JetStream(t, p.nc)
	s, err := js.Stream(context.Background(), "KV_"+console.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// One records subject (u1 and u2 share it) and one pointer subject per
	// field: 4 subjects; a record and 3 pointers per request.
	if info.State.NumSubjects > 4 || info.State.Msgs != 4*n {
		t.Errorf("index: %d subjects, %d messages for %d requests", info.State.NumSubjects, info.State.Msgs, n)
	}
	t.Logf("index: %d subjects, %d messages for %d requests", info.State.NumSubjects, info.State.Msgs, n)
}

// TestIndexMigration: a store the previous build wrote (the index a
// key-value bucket, one key per request and field: q.<token> records,
// x.<field>.<hash>.<token> keys; the shared durable consumer acknowledged)
// is upgraded by streams.Apply in place (one message per subject lifted);
// the new console then lists the old records beside the new ones, newest
// first, finds every request by id, and its searches find the new
// requests.
func TestIndexMigration(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := natstest.Config()
	old := jetstream.KeyValueConfig{Bucket: console.Bucket, History: 1, TTL: cfg.ResponsesMaxAge,
		Storage: cfg.Storage, Replicas: 1, Description: "E2A console index of recent requests"}
	kv, err := js.CreateKeyValue(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	// The previous indexer: its consumer reads the requests, writes the
	// old keys and acknowledges them.
	oldIDs := publishRequests(t, nc, "idle", 5, func(i int) string {
		return fmt.Sprintf(`{"request_id":"bulk-%04d","user_id":"alice","task_id":"task-old","params":{}}`, i)
	})
	rs, err := js.Stream(ctx, streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	// The earlier builds' consumer: its name, ack-all.
	oldCons := streams.IndexConsumerConfig("console-index-requests", subjects.AllRequests, "old", old.TTL, time.Now(), 64)
	oldCons.AckPolicy = jetstream.AckAllPolicy
	cons, err := rs.CreateConsumer(ctx, oldCons)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(len(oldIDs), jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var last jetstream.Msg
	for m := range batch.Messages() {
		md, _ := m.Metadata()
		_, id, _ := subjects.ParseRequest(m.Subject())
		tok, _ := subjects.EncodeID(id)
		rec, _ := json.Marshal(map[string]any{"request_id": id, "time": md.Timestamp.UTC(), "pool": "idle",
			"principal": "alice", "task_id": "task-old", "seq": md.Sequence.Stream})
		if _, err := kv.Create(ctx, "q."+tok, rec); err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256([]byte("task-old"))
		if _, err := kv.Create(ctx, "x.task."+hex.EncodeToString(h[:12])+"."+tok, nil); err != nil {
			t.Fatal(err)
		}
		last = m
	}
	if last == nil {
		t.Fatal("the old indexer read nothing")
	}
	if err := last.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	// The upgrade: the new streams apply, then the new console.
	rep, err := streams.Apply(ctx, js, cfg, streams.WithStream(console.IndexStreamConfig(cfg, 0)))
	if err != nil {
		t.Fatal(err, rep)
	}
	if ch, ok := rep.Get("KV_" + console.Bucket); !ok || ch.Action != streams.ActionUpdated {
		t.Fatalf("apply on the old bucket: %+v", ch)
	}
	con, err := console.New(ctx, nc, nil, console.WithStreamsConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	// The new consumer goes on after what the old one acknowledged.
	lastMeta, _ := last.Metadata()
	if nw, err := rs.Consumer(ctx, console.RequestsConsumer); err != nil || nw.CachedInfo().Config.OptStartSeq != lastMeta.Sequence.Stream+1 {
		t.Fatalf("the new index consumer: %v; want it to start at E2A_REQUESTS seq %d, after the old one's ack floor", err, lastMeta.Sequence.Stream+1)
	}
	newIDs := make([]string, 0, 4)
	for i := range 4 {
		id := fmt.Sprintf("new-%d", i)
		subj, _ := subjects.Request("idle", id)
		body := fmt.Sprintf(`{"request_id":%q,"user_id":"alice","task_id":"task-new","params":{}}`, id)
		if _, err := js.Publish(ctx, subj, []byte(body), jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
		newIDs = append(newIDs, id)
	}
	want := slices.Concat(oldIDs, newIDs)
	slices.Reverse(want)
	var got []string
	waitFor(t, 20*time.Second, "the old and new records listed", func() bool {
		got = entryIDs(t, con, console.Query{Limit: 4})
		return len(got) >= len(want)
	})
	if !slices.Equal(got, want) {
		t.Fatalf("list after the upgrade: %v, want %v", got, want)
	}
	for _, id := range want {
		if e, err := con.Lookup(ctx, id); err != nil || e == nil || e.Principal != "alice" {
			t.Errorf("lookup %s: %+v %v", id, e, err)
		}
	}
	newest := slices.Clone(newIDs)
	slices.Reverse(newest)
	// A request's record and its search keys are separate messages of the
	// index: the last request can be listed before its task key is stored
	// (CI on ab65baa: the search found none yet).
	waitFor(t, 20*time.Second, "the new requests found by their task", func() bool {
		got = entryIDs(t, con, console.Query{TaskID: "task-new", User: "alice"})
		return len(got) >= len(newest)
	})
	if !slices.Equal(got, newest) {
		t.Errorf("task search after the upgrade: %v, want %v", got, newest)
	}
	// The old keys of a field are not read: old requests are found by
	// their id and in the list until they expire (docs/capacity.md).
	if got := entryIDs(t, con, console.Query{TaskID: "task-old"}); len(got) != 0 {
		t.Errorf("task search found old keys: %v", got)
	}
	info, err := js.Stream(ctx, "KV_"+console.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if c := info.CachedInfo().Config; c.MaxMsgsPerSubject != -1 {
		t.Errorf("index stream keeps %d messages per subject", c.MaxMsgsPerSubject)
	}
}
