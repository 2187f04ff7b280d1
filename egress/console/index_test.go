package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestIndexEntries checks what the indexer records for succeeded and
// failed requests, and the filters of the list.
func TestIndexEntries(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true})
	ctx := context.Background()
	t0 := time.Now()
	a1 := p.submit(t, `{"task_id":"task-7","session_id":"sess-1","params":{"text":"one","frames":3}}`, "X-Api-Key", keyAlice)
	a2 := p.submit(t, `{"task_id":"task-8","session_id":"sess-1","params":{"text":"two"}}`, "X-Api-Key", keyAlice)
	b1 := p.submit(t, `{"params":{"text":"three","fail":"boom","fail_after":2}}`, "X-Api-Key", keyBob)
	got := waitFinal(t, p, a1, a2, b1)

	e := got[a1]
	if e.Pool != "demo" || e.Protocol != "e2a" || e.Principal != "alice" || e.TaskID != "task-7" || e.SessionID != "sess-1" {
		t.Errorf("entry %+v", e)
	}
	// demo: reasoning, tool call, tool result, 3 text pieces, complete.
	if e.Status != console.StatusSucceeded || e.Frames != 7 || e.DurationMS == nil || *e.DurationMS <= 0 || e.FirstFrame == nil {
		t.Errorf("progress of %s: %+v", a1, e)
	}
	if e.Time.Before(t0.Add(-time.Second)) || e.Time.After(time.Now()) {
		t.Errorf("time %v not around %v", e.Time, t0)
	}
	if f := got[b1]; f.Status != console.StatusFailed || f.ErrorCode != "boom" || f.Frames != 3 || f.Principal != "bob" {
		t.Errorf("failed entry %+v", f)
	}

	ids := func(pg console.Page) []string {
		var out []string
		for _, e := range pg.Entries {
			out = append(out, e.RequestID)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		q    console.Query
		want []string
	}{
		{"all newest first", console.Query{}, []string{b1, a2, a1}},
		{"request id", console.Query{RequestID: a2}, []string{a2}},
		{"request id and other user", console.Query{RequestID: a2, User: "bob"}, nil},
		{"task", console.Query{TaskID: "task-7"}, []string{a1}},
		{"session", console.Query{SessionID: "sess-1"}, []string{a2, a1}},
		{"user", console.Query{User: "bob"}, []string{b1}},
		{"user and status", console.Query{User: "alice", Status: console.StatusSucceeded}, []string{a2, a1}},
		{"status failed", console.Query{Status: console.StatusFailed}, []string{b1}},
		{"since future", console.Query{Since: time.Now().Add(time.Hour)}, nil},
		{"until past", console.Query{Until: t0.Add(-time.Hour)}, nil},
		{"range", console.Query{Since: t0.Add(-time.Minute), Until: time.Now().Add(time.Minute)}, []string{b1, a2, a1}},
		{"unknown task", console.Query{TaskID: "nope"}, nil},
	} {
		pg, err := p.con.List(ctx, tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := ids(pg); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := p.con.List(ctx, console.Query{Status: "weird"}); err == nil {
		t.Error("bad status accepted")
	}
}

// publishRequests publishes n envelopes for pool straight onto the request
// subjects (no agent serves the pool: they stay pending).
func publishRequests(t *testing.T, nc *nats.Conn, pool string, n int, mk func(i int) string) []string {
	t.Helper()
	js := natstest.JetStream(t, nc)
	ctx := context.Background()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("bulk-%04d", i)
		subj, err := subjects.Request(pool, id)
		if err != nil {
			t.Fatal(err)
		}
		body := mk(i)
		if _, err := js.Publish(ctx, subj, []byte(body), jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestIndexPaging pages through a few hundred entries with small pages and
// post-filters, and checks order, completeness and the scan budget.
func TestIndexPaging(t *testing.T) {
	p := startPipeline(t, pipelineOptions{noAgent: true, console: []console.Option{console.WithScanBudget(120)}})
	ctx := context.Background()
	const n = 300
	ids := publishRequests(t, p.nc, "idle", n, func(i int) string {
		return fmt.Sprintf(`{"request_id":"bulk-%04d","user_id":"u%d","task_id":"t%d","params":{}}`, i, i%3, i%10)
	})
	waitIndexed(t, p, ids...)
	// Newest first, all of them, pages of 17.
	var all []string
	var before uint64
	for range n {
		pg, err := p.con.List(ctx, console.Query{Limit: 17, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range pg.Entries {
			all = append(all, e.RequestID)
		}
		if pg.Next == 0 {
			break
		}
		before = pg.Next
	}
	want := slices.Clone(ids)
	slices.Reverse(want)
	if !slices.Equal(all, want) {
		t.Fatalf("paged %d entries, want %d in reverse order; first %v", len(all), len(want), all[:min(5, len(all))])
	}
	// A secondary key (task) with a post-filter (user): t3 holds 30
	// requests, a third of them of user u0.
	var got []string
	before = 0
	for range n {
		pg, err := p.con.List(ctx, console.Query{TaskID: "t3", User: "u0", Limit: 4, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range pg.Entries {
			if e.TaskID != "t3" || e.Principal != "u0" || e.Status != console.StatusPending {
				t.Fatalf("entry %+v does not match", e)
			}
			got = append(got, e.RequestID)
		}
		if pg.Next == 0 {
			break
		}
		before = pg.Next
	}
	var wantF []string
	for i := n - 1; i >= 0; i-- {
		if i%10 == 3 && i%3 == 0 {
			wantF = append(wantF, ids[i])
		}
	}
	if !slices.Equal(got, wantF) {
		t.Fatalf("task+user filter: got %v, want %v", got, wantF)
	}
	// A filter nothing matches runs into the budget and says so.
	pg, err := p.con.List(ctx, console.Query{Status: console.StatusFailed})
	if err != nil {
		t.Fatal(err)
	}
	if len(pg.Entries) != 0 || !pg.Partial || pg.Next == 0 || pg.Scanned < 120 {
		t.Fatalf("budget page: %+v", pg)
	}
	// Until cuts by time (binary search on the index stream).
	mid, err := p.con.Lookup(ctx, ids[150])
	if err != nil || mid == nil {
		t.Fatal(mid, err)
	}
	pg, err = p.con.List(ctx, console.Query{Until: mid.Time, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range pg.Entries {
		if e.Time.After(mid.Time) {
			t.Fatalf("entry %s at %v after until %v", e.RequestID, e.Time, mid.Time)
		}
	}
	if len(pg.Entries) < 151 {
		t.Fatalf("until: %d entries, want at least 151", len(pg.Entries))
	}
}

// TestIndexSharedByTwoProcesses runs a second console indexer on the same
// durable consumers, as a second egress replica would: every request is
// indexed once with its final state.
func TestIndexSharedByTwoProcesses(t *testing.T) {
	p := startPipeline(t, pipelineOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	second, err := console.New(ctx, p.nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	var ids []string
	for i := range 20 {
		ids = append(ids, p.submit(t, fmt.Sprintf(`{"params":{"text":"r%d","frames":2}}`, i)))
	}
	got := waitFinal(t, p, ids...)
	for id, e := range got {
		if e.Status != console.StatusSucceeded || e.Frames != 6 {
			t.Errorf("%s: %+v", id, e)
		}
	}
	pg, err := second.List(ctx, console.Query{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(pg.Entries) != len(ids) {
		t.Fatalf("%d entries, want %d", len(pg.Entries), len(ids))
	}
}

// TestIndexProvisioning checks that the index stream's definition goes
// through streams.Apply and that New accepts the stream Apply made.
func TestIndexProvisioning(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	ctx := context.Background()
	cfg := natstest.Config()
	sc := console.IndexStreamConfig(cfg, 0)
	// Bounded in bytes too, oldest first: an unbounded stream grows into
	// the space the others' reservations leave, and the server refuses
	// writes to every stream once max_file_store is used up.
	if sc.Name != "KV_"+console.Bucket || sc.MaxAge != cfg.ResponsesMaxAge || sc.MaxMsgsPerSubject != -1 || !sc.AllowDirect ||
		sc.MaxBytes != cfg.IndexMaxBytes || sc.MaxBytes <= 0 || sc.Discard != jetstream.DiscardOld {
		t.Fatalf("index stream config %+v", sc)
	}
	if rep, err := streams.Apply(ctx, js, cfg, streams.WithStream(sc)); err != nil {
		t.Fatal(err, rep)
	}
	c, err := console.New(ctx, nc, nil, console.WithStreamsConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	rep, err := streams.Apply(ctx, js, cfg, streams.WithStream(sc))
	if err != nil {
		t.Fatal(err)
	}
	if ch, ok := rep.Get(sc.Name); !ok || ch.Action != streams.ActionUnchanged {
		t.Fatalf("after New, Apply reports %+v", ch)
	}
	// The consumers exist, durable, explicit acks.
	for _, s := range []struct{ stream, name string }{
		{streams.RequestsStream, console.RequestsConsumer},
	} {
		cons, err := js.Consumer(ctx, s.stream, s.name)
		if err != nil {
			t.Fatal(err)
		}
		ci := cons.CachedInfo()
		if ci.Config.Durable != s.name || ci.Config.AckPolicy != jetstream.AckExplicitPolicy {
			b, _ := json.Marshal(ci.Config)
			t.Fatalf("consumer %s: %s", s.name, b)
		}
	}
}

// TestProgressFromFrames: a request's progress is what its frames say when
// the entry is read: pending without a frame, running with its frame count
// and first frame time, failed with the final frame's error code and end
// time. Frames are published straight to the stream (no agent), so each
// state is observed at a known point.
func TestProgressFromFrames(t *testing.T) {
	p := startPipeline(t, pipelineOptions{})
	ctx := context.Background()
	js, err := jetstream.New(p.nc)
	if err != nil {
		t.Fatal(err)
	}
	const id = "progress-1"
	subj, _ := subjects.Request("idle", id)
	if _, err := js.Publish(ctx, subj, []byte(`{"protocol_version":"1.0","request_id":"progress-1","method":"x","params":{}}`)); err != nil {
		t.Fatal(err)
	}
	var e *console.Entry
	waitFor(t, 10*time.Second, "the request indexed", func() bool {
		e, err = p.con.Lookup(ctx, id)
		return err == nil && e != nil
	})
	waitIndexed(t, p, id)
	if e.Status != console.StatusPending || e.Frames != 0 || e.FirstFrame != nil {
		t.Fatalf("before any frame: %+v", e)
	}
	rsubj, _ := subjects.Response(id)
	frame := func(seq int, final bool, status, kind, body string) {
		t.Helper()
		f := fmt.Sprintf(`{"response_id":"r%d","request_id":%q,"sequence":%d,"is_final":%v,"status":%q,"response_kind":%q,"body":%s}`,
			seq, id, seq, final, status, kind, body)
		if _, err := js.Publish(ctx, rsubj, []byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	frame(0, false, "in_progress", "e2a.chunk", `{"delta_kind":"text","delta":"a"}`)
	frame(1, false, "in_progress", "e2a.chunk", `{"delta_kind":"text","delta":"b"}`)
	if e, err = p.con.Lookup(ctx, id); err != nil || e.Status != console.StatusRunning || e.Frames != 2 || e.FirstFrame == nil || e.Finished != nil {
		t.Fatalf("running: %+v %v", e, err)
	}
	first := *e.FirstFrame
	frame(2, true, "failed", "e2a.error", `{"code":"quota","message":"no","retryable":false}`)
	e, err = p.con.Lookup(ctx, id)
	if err != nil || e.Status != console.StatusFailed || e.ErrorCode != "quota" || e.Frames != 3 || e.Finished == nil ||
		!e.FirstFrame.Equal(first) || e.Finished.Before(first) || e.DurationMS == nil {
		t.Fatalf("failed: %+v %v", e, err)
	}
	pg, err := p.con.List(ctx, console.Query{Status: console.StatusFailed})
	if err != nil || len(pg.Entries) != 1 || pg.Entries[0].RequestID != id {
		t.Fatalf("status filter: %+v %v", pg, err)
	}
}
