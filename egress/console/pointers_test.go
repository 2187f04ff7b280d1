package console_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestIndexPointersOfDuplicateRecord: an indexer stored a batch's records
// and stopped (ctx cancelled by a rolling restart, or killed) before their
// pointers were stored; the batch was not acknowledged, so it is delivered
// again (AckWait 30 s, well inside the 2 min duplicate window). The record
// is then a duplicate and indexRequests publishes no pointer: the request
// is listed for its user but a search by its task, session or context
// never finds it.
func TestIndexPointersOfDuplicateRecord(t *testing.T) {
	p := startPipeline(t, pipelineOptions{noAgent: true})
	ctx := context.Background()
	js := natstest.JetStream(t, p.nc)
	s, err := js.Stream(ctx, streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seq := info.State.LastSeq + 1 // the sequence the request will get
	const id, user, task = "bulk-0000", "alice", "task-redelivered"
	// What the first attempt stored before it stopped: the record, with
	// the Nats-Msg-Id indexRequests gives it, and no pointer.
	rec, _ := json.Marshal(map[string]any{"request_id": id, "time": time.Now().UTC(), "pool": "idle",
		"principal": user, "task_id": task, "seq": seq})
	if _, err := js.Publish(ctx, subjects.KV(console.Bucket, "q."+bucketOf(user)), rec,
		jetstream.WithMsgID(fmt.Sprintf("ix.%d", seq))); err != nil {
		t.Fatal(err)
	}
	ids := publishRequests(t, p.nc, "idle", 1, func(int) string {
		return fmt.Sprintf(`{"request_id":%q,"user_id":%q,"task_id":%q,"params":{}}`, "bulk-0000", user, task)
	})
	waitIndexed(t, p, ids...) // the record stored by the "first attempt" is listed
	testkit.Eventually(t, 10*time.Second, "a search by task finding the request", func() bool {
		return slices.Contains(entryIDs(t, p.con, console.Query{TaskID: task}), id)
	})
}

// idBucket is the index bucket of an id (the console's valueBucket:
// the first 3 hex digits of SHA-256).
func idBucket(v string) string {
	h := sha256.Sum256([]byte(v))
	return hex.EncodeToString(h[:2])[:3]
}

// sameBucketID returns an id other than v, with prefix, in v's bucket.
func sameBucketID(t *testing.T, v, prefix string) string {
	t.Helper()
	want := idBucket(v)
	for i := 0; i < 1_000_000; i++ {
		if id := fmt.Sprintf("%s-%d", prefix, i); id != v && idBucket(id) == want {
			return id
		}
	}
	t.Fatal("no id in the bucket")
	return ""
}

// listAs lists with the key's principal and decodes the page.
func listAs(t *testing.T, p *pipeline, key string, q url.Values) console.Page {
	t.Helper()
	resp, b := p.do(t, "GET", "/console/api/requests?"+q.Encode(), "", "X-Api-Key", key)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("list %s: %d %s", q.Encode(), resp.StatusCode, b)
	}
	return decode[console.Page](t, b)
}

// TestListFilterOnAnothersIDAnswersAsUnused: a principal filtering its
// list on another principal's task (session, context) id gets the answer
// of an id nobody uses (the ownership rule: "everyone else gets ... not
// found", and the list is forced to the caller's own requests). The walk
// of the id's pointer bucket passes another principal's record over before
// the ?since= cut (lister.List), so alice's page for bob's id, scanned
// count included, is her page for an unused id of the same bucket: nothing
// tells her bob's task exists or, moving since, when bob's request was
// made.
func TestListFilterOnAnothersIDAnswersAsUnused(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true})
	for _, field := range []struct{ query, body string }{{"task", "task_id"}, {"session", "session_id"}, {"context", "context_id"}} {
		bobValue := "bob-private-" + field.query + "-7c1e"
		aliceValue := sameBucketID(t, bobValue, "alice-"+field.query)
		unused := sameBucketID(t, bobValue, "nobody-"+field.query)
		if unused == aliceValue {
			unused = sameBucketID(t, aliceValue, "nobody-b-"+field.query)
		}
		// Alice's own request in the bucket first, then bob's.
		aliceID := p.submit(t, `{"`+field.body+`":"`+aliceValue+`","params":{"text":"alice","frames":1}}`, "X-Api-Key", keyAlice)
		waitFor(t, 20*time.Second, "alice's request in the index", func() bool {
			pg := listAs(t, p, keyAlice, url.Values{field.query: {aliceValue}})
			return len(pg.Entries) == 1 && pg.Entries[0].RequestID == aliceID
		})
		bobID := p.submit(t, `{"`+field.body+`":"`+bobValue+`","params":{"text":"bob","frames":1}}`, "X-Api-Key", keyBob)
		waitFor(t, 20*time.Second, "bob's request in the index", func() bool {
			pg := listAs(t, p, keyBob, url.Values{field.query: {bobValue}})
			return len(pg.Entries) == 1 && pg.Entries[0].RequestID == bobID
		})

		since := time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339)
		forBob := listAs(t, p, keyAlice, url.Values{field.query: {bobValue}, "since": {since}})
		forUnused := listAs(t, p, keyAlice, url.Values{field.query: {unused}, "since": {since}})
		if len(forBob.Entries) != 0 {
			t.Fatalf("alice lists bob's %s: %+v", field.query, forBob.Entries)
		}
		if forBob.Scanned != forUnused.Scanned || forBob.Next != forUnused.Next || forBob.Partial != forUnused.Partial {
			t.Errorf("alice's list with ?%s=<bob's id>&since=… answers {scanned:%d next:%d partial:%t}, with an unused id of the same bucket "+
				"{scanned:%d next:%d partial:%t}: the answers must be the same, another principal's %s id answering as one nobody uses "+
				"(else alice learns that bob's exists, and, moving since, when bob's request was made)",
				field.query, forBob.Scanned, forBob.Next, forBob.Partial, forUnused.Scanned, forUnused.Next, forUnused.Partial, field.query)
		}
	}
}

// TestIndexPointerOfEarlierBuild: a pointer stored by an earlier build
// names no owner ({"v","s"} only); a search by its id still reads the
// record it names, listing the request to its principal and to no one
// else (the record's principal is checked).
func TestIndexPointerOfEarlierBuild(t *testing.T) {
	p := startPipeline(t, pipelineOptions{noAgent: true})
	ctx := context.Background()
	js := natstest.JetStream(t, p.nc)
	const id, user, task = "old-pointer-1", "alice", "task-old-pointer"
	rec, _ := json.Marshal(map[string]any{"request_id": id, "time": time.Now().UTC(), "pool": "idle",
		"principal": user, "task_id": task, "seq": 1})
	ack, err := js.Publish(ctx, subjects.KV(console.Bucket, "q."+bucketOf(user)), rec)
	if err != nil {
		t.Fatal(err)
	}
	ptr := fmt.Appendf(nil, `{"v":%q,"s":%d}`, task, ack.Sequence)
	if _, err := js.Publish(ctx, subjects.KV(console.Bucket, "x.task."+bucketOf(task)), ptr); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user string
		want []string
	}{{user, []string{id}}, {"bob", nil}, {"", []string{id}}} {
		if got := entryIDs(t, p.con, console.Query{TaskID: task, User: c.user}); !slices.Equal(got, c.want) {
			t.Errorf("search by the task of an earlier build's pointer, user %q: %v, want %v", c.user, got, c.want)
		}
	}
}
