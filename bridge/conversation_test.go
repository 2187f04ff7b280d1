package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// openConversations opens the conversations store on a server of its
// own, with a context of 30 s ended by the test's cleanup.
func openConversations(t *testing.T) (*nats.Conn, jetstream.JetStream, context.Context, *Conversations) {
	t.Helper()
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	convs, err := OpenConversations(ctx, js, natstest.Config())
	if err != nil {
		t.Fatal(err)
	}
	return nc, js, ctx, convs
}

// storeTurn stores request id of user's context ctxID with text as
// ingress and an agent store it in pool p: the envelope, and a frame,
// with a final one when final.
func storeTurn(t *testing.T, nc *nats.Conn, js jetstream.JetStream, ctx context.Context, id, user, ctxID, text string, final bool) *e2a.Envelope {
	t.Helper()
	env := &e2a.Envelope{RequestID: id, UserID: user, ContextID: ctxID, Params: map[string]any{"text": text}}
	publishRequest(t, js, ctx, env)
	seq := natstest.PublishBurst(t, nc, id, 0, 0, natstest.Frame(id, 0, false))
	if final {
		natstest.PublishBurst(t, nc, id, 1, seq, natstest.Frame(id, 1, true))
	}
	return env
}

// publishRequest publishes env's envelope in pool p as ingress does.
func publishRequest(t *testing.T, js jetstream.JetStream, ctx context.Context, env *e2a.Envelope) {
	t.Helper()
	b, err := e2a.MarshalEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	subj, _ := subjects.Request("p", env.RequestID)
	if _, err := js.Publish(ctx, subj, b); err != nil {
		t.Fatal(err)
	}
}

// TestConversations: Update and Get keep a conversation per pool,
// principal and conversation id; History returns its stored turns, oldest
// first, without the current one; a principal naming another's context id
// reaches a conversation of its own; concurrent updates all land.
func TestConversations(t *testing.T) {
	nc, js, ctx, convs := openConversations(t)
	// Two turns of alice's context ctx-1, stored as ingress and an agent
	// store them: the envelope, and the frames with a final one.
	store := func(id, user, ctxID string, final bool) *e2a.Envelope {
		return storeTurn(t, nc, js, ctx, id, user, ctxID, "turn "+id, final)
	}
	a1 := store("a1", "alice", "ctx-1", true)
	a2 := store("a2", "alice", "ctx-1", false) // still running
	a3 := store("a3", "alice", "ctx-1", false) // the one being served
	for _, env := range []*e2a.Envelope{a1, a2} {
		if err := convs.Update(ctx, "p", env, func(c *Conversation) { c.UpstreamContextID = "up-ctx" }); err != nil {
			t.Fatal(err)
		}
	}
	// The same request updating twice is one turn.
	if err := convs.Update(ctx, "p", a2, func(c *Conversation) { c.UpstreamTaskOpen = true }); err != nil {
		t.Fatal(err)
	}
	conv, found, err := convs.Get(ctx, "p", a3)
	if err != nil || !found || conv.UpstreamContextID != "up-ctx" || !conv.UpstreamTaskOpen || len(conv.RequestIDs) != 2 {
		t.Fatalf("Get: %+v %v %v", conv, found, err)
	}
	if err := convs.Update(ctx, "p", a3, func(*Conversation) {}); err != nil {
		t.Fatal(err)
	}
	conv, _, _ = convs.Get(ctx, "p", a3)
	turns, _, err := convs.History(ctx, "p", a3, conv, DefaultMaxHistoryBytes)
	if err != nil || len(turns) != 2 || turns[0].Envelope.RequestID != "a1" || turns[1].Envelope.RequestID != "a2" {
		t.Fatalf("History: %+v %v", turns, err)
	}
	if turns[0].Final == nil || !turns[0].Final.IsFinal || turns[1].Final != nil {
		t.Fatalf("History finals: %+v, %+v", turns[0].Final, turns[1].Final)
	}
	// a2 served again (a retry, a redelivery) after a3 was recorded: its
	// history is the turns before it, not the later a3 (it had a1 and a3).
	if turns, _, err := convs.History(ctx, "p", a2, conv, DefaultMaxHistoryBytes); err != nil || len(turns) != 1 || turns[0].Envelope.RequestID != "a1" {
		t.Fatalf("History of a2 served again after a3: %+v %v; want a1 only", turns, err)
	}

	// Mallory names alice's context: a conversation of her own, empty.
	m1 := store("m1", "mallory", "ctx-1", true)
	if conv, found, err := convs.Get(ctx, "p", m1); err != nil || found {
		t.Fatalf("mallory reached %+v (%v)", conv, err)
	}
	// Even given alice's conversation record, History returns none of
	// alice's turns to mallory (the envelopes' user_id is checked again).
	if turns, _, err := convs.History(ctx, "p", m1, conv, DefaultMaxHistoryBytes); err != nil || len(turns) != 0 {
		t.Fatalf("mallory's history through alice's record: %+v %v", turns, err)
	}
	// Another pool: another conversation.
	if _, found, _ := convs.Get(ctx, "q", a3); found {
		t.Fatal("pool q reached pool p's conversation")
	}
	// A request that names no conversation is a conversation of its own
	// (its upstream ids are kept for a worker that takes it over).
	lone := &e2a.Envelope{RequestID: "x", UserID: "alice"}
	if err := convs.Update(ctx, "p", lone, func(c *Conversation) { c.UpstreamTaskID = "up-x" }); err != nil {
		t.Fatal(err)
	}
	if c, found, err := convs.Get(ctx, "p", lone); !found || err != nil || c.UpstreamTaskID != "up-x" {
		t.Fatalf("lone request: %+v %v %v", c, found, err)
	}
	if _, found, _ := convs.Get(ctx, "p", &e2a.Envelope{RequestID: "x", UserID: "mallory"}); found {
		t.Fatal("mallory reached alice's request's record")
	}
	if err := convs.Update(ctx, "p", &e2a.Envelope{}, func(*Conversation) { t.Error("fn called for an envelope without ids") }); err != nil {
		t.Fatal(err)
	}

	// Concurrent updates of one conversation all land (compare-and-set).
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := &e2a.Envelope{RequestID: "c" + strconv.Itoa(i), UserID: "bob", SessionID: "s-1"}
			if err := convs.Update(ctx, "p", env, func(*Conversation) {}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if conv, _, err := convs.Get(ctx, "p", &e2a.Envelope{UserID: "bob", SessionID: "s-1"}); err != nil || len(conv.RequestIDs) != 8 {
		t.Fatalf("after concurrent updates: %+v %v", conv, err)
	}
}

// TestConversationUpdatesUnderContention: MaxTurns turns of one session
// updating its record at once all land (each writer that another came
// first on backs off and tries again), and the record lists every one.
// With 16 attempts back to back, 32 writers under -race failed some.
func TestConversationUpdatesUnderContention(t *testing.T) {
	_, _, ctx, convs := openConversations(t)
	var wg sync.WaitGroup
	for i := range MaxTurns {
		wg.Go(func() {
			env := &e2a.Envelope{RequestID: "u" + strconv.Itoa(i), UserID: "carol", SessionID: "fan-out"}
			if err := convs.Update(ctx, "p", env, func(*Conversation) {}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	conv, _, err := convs.Get(ctx, "p", &e2a.Envelope{UserID: "carol", SessionID: "fan-out"})
	if err != nil || len(conv.RequestIDs) != MaxTurns {
		t.Fatalf("after %d concurrent updates: %d request ids, %v", MaxTurns, len(conv.RequestIDs), err)
	}
}

// TestConversationOf: the A2A context first, then the session, then the
// task.
func TestConversationOf(t *testing.T) {
	for _, c := range []struct {
		env      e2a.Envelope
		kind, id string
	}{
		{e2a.Envelope{ContextID: "c", SessionID: "s", TaskID: "t"}, "context", "c"},
		{e2a.Envelope{SessionID: "s", TaskID: "t"}, "session", "s"},
		{e2a.Envelope{TaskID: "t"}, "task", "t"},
		{e2a.Envelope{}, "", ""},
	} {
		kind, id, ok := ConversationOf(&c.env)
		if kind != c.kind || id != c.id || ok != (c.kind != "") {
			t.Errorf("%+v: %s %s %v", c.env, kind, id, ok)
		}
	}
}

// TestInConversation: a request naming a context, session or task belongs
// to a conversation a later request can continue; one naming only itself
// (or nothing) does not. HistoryError is the retryable
// history_unavailable, nil for nil.
func TestInConversation(t *testing.T) {
	for _, c := range []struct {
		env  e2a.Envelope
		want bool
	}{
		{e2a.Envelope{ContextID: "c", RequestID: "r"}, true},
		{e2a.Envelope{SessionID: "s", RequestID: "r"}, true},
		{e2a.Envelope{TaskID: "t", RequestID: "r"}, true},
		{e2a.Envelope{RequestID: "r"}, false},
		{e2a.Envelope{}, false},
	} {
		if got := InConversation(&c.env); got != c.want {
			t.Errorf("%+v: %v, want %v", c.env, got, c.want)
		}
	}
	if HistoryError(nil) != nil {
		t.Error("HistoryError(nil) is not nil")
	}
	var ae *agent.Error
	if err := HistoryError(errors.New("down")); !errors.As(err, &ae) || ae.Code != "history_unavailable" || !ae.Retryable {
		t.Errorf("HistoryError: %#v", err)
	}
}

// TestConversationThreads: each pipeline task of a context is a thread
// with its own upstream task. Task t1 interrupted, then a new task t2 of
// the context: t2 is not interrupted (its message starts a new upstream
// task in the context's upstream context), t1 still is, and a turn of t1
// after t2's finds t1's upstream task. A session's turns naming no task
// are one thread. A record written by the previous version (no threads)
// is read as the thread of its last request; the other tasks of its
// context are new threads; its next write keeps that thread.
func TestConversationThreads(t *testing.T) {
	nc, js, ctx, convs := openConversations(t)
	// request publishes a request's envelope as ingress does.
	request := func(id, contextID, task string) *e2a.Envelope {
		env := &e2a.Envelope{RequestID: id, UserID: "alice", ContextID: contextID, TaskID: task}
		publishRequest(t, js, ctx, env)
		return env
	}
	// asks stores a request's final frame: its turn ended input-required.
	asks := func(id string) {
		r := e2a.ResponseFor(&e2a.Envelope{RequestID: id})
		r.ResponseID, r.Timestamp, r.Provenance = id+"-0", e2a.Now(), e2a.Provenance{SourceProtocol: e2a.SourceE2A}
		r.IsFinal, r.Status, r.ResponseKind = true, e2a.StatusSucceeded, e2a.KindA2AStreamEvent
		r.Body = e2a.MarshalBody(e2a.InterruptBody(e2a.StateInputRequired, "who?"))
		b, err := e2a.MarshalResponse(&r)
		if err != nil {
			t.Fatal(err)
		}
		natstest.PublishBurst(t, nc, id, 0, 0, b)
	}
	record := func(env *e2a.Envelope, upTask string) {
		t.Helper()
		if err := convs.Update(ctx, "p", env, func(c *Conversation) {
			c.UpstreamContextID, c.UpstreamTaskID = "up-ctx", upTask
			th := c.Thread(env)
			th.UpstreamTaskID, th.UpstreamContextID = upTask, "up-ctx"
		}); err != nil {
			t.Fatal(err)
		}
	}
	interrupted := func(env *e2a.Envelope) (bool, *Thread, Conversation) {
		t.Helper()
		conv, _, err := convs.Get(ctx, "p", env)
		if err != nil {
			t.Fatal(err)
		}
		open, err := convs.Interrupted(ctx, env, conv)
		if err != nil {
			t.Fatal(err)
		}
		return open, conv.Thread(env), conv
	}
	record(request("r1", "ctx", "t1"), "up-1") // t1 asks
	asks("r1")
	r2 := request("r2", "ctx", "t2") // a new task of the context
	if open, th, conv := interrupted(r2); open || th != nil || conv.UpstreamContextID != "up-ctx" {
		t.Fatalf("new task t2: interrupted %v, thread %+v, upstream context %q", open, th, conv.UpstreamContextID)
	}
	record(r2, "up-2")
	asks("r2") // t2 asks too
	r3 := request("r3", "ctx", "t2")
	if open, th, _ := interrupted(r3); !open || th.UpstreamTaskID != "up-2" {
		t.Fatalf("t2's answer: interrupted %v, thread %+v", open, th)
	}
	record(r3, "up-2")
	natstest.PublishBurst(t, nc, "r3", 0, 0, natstest.Frame("r3", 0, true)) // t2 completed
	r4 := request("r4", "ctx", "t1")                                        // t1's answer, after t2's turns
	if open, th, _ := interrupted(r4); !open || th.UpstreamTaskID != "up-1" {
		t.Fatalf("t1's answer after t2's: interrupted %v, thread %+v", open, th)
	}
	if err := convs.Update(ctx, "p", r4, func(*Conversation) {}); err != nil {
		t.Fatal(err)
	}
	// The turn being served is left out: r4 recorded as its thread's last
	// turn, r1's interrupt is still what r4 answers.
	if open, th, conv := interrupted(r4); !open || len(th.RequestIDs) != 2 || len(conv.RequestIDs) != 4 {
		t.Fatalf("r4 recorded: interrupted %v, thread %+v, conversation %+v", open, th, conv)
	}
	r5 := request("r5", "ctx", "t2") // t2 is completed: a new upstream task
	if open, th, _ := interrupted(r5); open || th.UpstreamTaskID != "up-2" {
		t.Fatalf("t2 after its completion: interrupted %v, thread %+v", open, th)
	}

	// A session's turns naming no task are one thread; an A2A task is one.
	s1 := &e2a.Envelope{RequestID: "s1", SessionID: "sess"}
	s2 := &e2a.Envelope{RequestID: "s2", SessionID: "sess"}
	if ThreadOf(s1) != "session:sess" || ThreadOf(s2) != ThreadOf(s1) || ThreadOf(r4) != "task:t1" || ThreadOf(&e2a.Envelope{}) != "" {
		t.Fatalf("threads: %q %q %q", ThreadOf(s1), ThreadOf(s2), ThreadOf(r4))
	}

	// A record of the previous version, its last request l1 of task lt1
	// interrupted.
	l1 := request("l1", "legacy-ctx", "lt1")
	asks("l1")
	kv, err := js.KeyValue(ctx, "E2A_BRIDGE")
	if err != nil {
		t.Fatal(err)
	}
	old := `{"upstream_task_id":"up-l","upstream_context_id":"up-lctx","request_ids":["l0","l1"]}`
	if _, err := kv.Put(ctx, conversationKey("p", l1), []byte(old)); err != nil {
		t.Fatal(err)
	}
	lt1 := &e2a.Envelope{RequestID: "l2", UserID: "alice", ContextID: "legacy-ctx", TaskID: "lt1"}
	lt2 := &e2a.Envelope{RequestID: "l3", UserID: "alice", ContextID: "legacy-ctx", TaskID: "lt2"}
	if open, th, _ := interrupted(lt1); !open || th.UpstreamTaskID != "up-l" || th.UpstreamContextID != "up-lctx" {
		t.Fatalf("the earlier record's task: interrupted %v, thread %+v", open, th)
	} else if task, ok := th.TaskOf("l1"); !ok || task != "up-l" {
		t.Fatalf("the earlier record's task is its last request's: %q %v, thread %+v", task, ok, th)
	}
	if open, th, conv := interrupted(lt2); open || th != nil || conv.UpstreamContextID != "up-lctx" {
		t.Fatalf("a new task of the earlier record's context: interrupted %v, thread %+v, %+v", open, th, conv)
	}
	if err := convs.Update(ctx, "p", lt2, func(*Conversation) {}); err != nil {
		t.Fatal(err)
	}
	if open, th, conv := interrupted(lt1); !open || th.UpstreamTaskID != "up-l" || len(conv.Threads) != 2 {
		t.Fatalf("the earlier record's task after a write: interrupted %v, thread %+v, %+v", open, th, conv)
	}
	// An earlier record with upstream_task_open: honoured for its task.
	old = `{"upstream_task_id":"up-o","upstream_context_id":"up-octx","upstream_task_open":true,"request_ids":["o1"]}`
	o1 := request("o1", "open-ctx", "ot1")
	if _, err := kv.Put(ctx, conversationKey("p", o1), []byte(old)); err != nil {
		t.Fatal(err)
	}
	if open, th, _ := interrupted(&e2a.Envelope{RequestID: "o2", UserID: "alice", ContextID: "open-ctx", TaskID: "ot1"}); !open || th.UpstreamTaskID != "up-o" {
		t.Fatalf("an earlier record left open: interrupted %v, thread %+v", open, th)
	}
	// A record of threads without their requests' tasks (the previous
	// version): the thread's task is its last request's, and stays so
	// when a later request of the thread records its own.
	old = `{"upstream_task_id":"up-b","upstream_context_id":"up-sctx","request_ids":["a","b"],` +
		`"threads":{"session:legacy-sess":{"upstream_task_id":"up-b","upstream_context_id":"up-sctx","request_ids":["a","b"]}}}`
	sa := &e2a.Envelope{RequestID: "a", UserID: "alice", SessionID: "legacy-sess"}
	if _, err := kv.Put(ctx, conversationKey("p", sa), []byte(old)); err != nil {
		t.Fatal(err)
	}
	sc := &e2a.Envelope{RequestID: "c", UserID: "alice", SessionID: "legacy-sess"}
	if err := convs.Update(ctx, "p", sc, func(c *Conversation) {
		th := c.Thread(sc)
		th.UpstreamTaskID = "up-c"
		th.SetTask(sc.RequestID, "up-c")
	}); err != nil {
		t.Fatal(err)
	}
	conv, _, err := convs.Get(ctx, "p", sa)
	if err != nil {
		t.Fatal(err)
	}
	th := conv.Thread(sa)
	for id, want := range map[string]string{"b": "up-b", "c": "up-c"} {
		if task, ok := th.TaskOf(id); !ok || task != want {
			t.Errorf("request %s of an earlier thread: task %q %v, want %q (thread %+v)", id, task, ok, want, th)
		}
	}
	if task, ok := th.TaskOf("a"); ok {
		t.Errorf("request a recorded no task the record kept: %q", task)
	}
	// Mallory's request of the same ids reaches none of it.
	if _, found, err := convs.Get(ctx, "p", &e2a.Envelope{RequestID: "m", UserID: "mallory", ContextID: "legacy-ctx", TaskID: "lt1"}); found || err != nil {
		t.Fatalf("mallory reached alice's conversation (%v)", err)
	}
}

// TestConversationThreadsBounded: past MaxThreads the thread written
// longest ago goes; a thread keeps its last MaxThreadTurns requests, and
// the upstream tasks of those only.
func TestConversationThreadsBounded(t *testing.T) {
	var c Conversation
	for i := range MaxThreads + 3 {
		env := &e2a.Envelope{RequestID: "r" + strconv.Itoa(i), ContextID: "c", TaskID: "t" + strconv.Itoa(i)}
		c.thread(env, int64(i+1))
	}
	if len(c.Threads) != MaxThreads || c.Threads["task:t0"] != nil || c.Threads["task:t2"] != nil || c.Threads["task:t3"] == nil {
		t.Fatalf("%d threads; t0 %v, t3 %v", len(c.Threads), c.Threads["task:t0"], c.Threads["task:t3"])
	}
	env := &e2a.Envelope{ContextID: "c", TaskID: "t5"}
	for i := range MaxThreadTurns + 2 {
		env.RequestID = "x" + strconv.Itoa(i)
		c.thread(env, int64(1000+i)).SetTask(env.RequestID, "up-"+env.RequestID)
		c.thread(env, int64(1000+i)) // once per request
	}
	th := c.Threads["task:t5"]
	if len(th.RequestIDs) != MaxThreadTurns || th.RequestIDs[MaxThreadTurns-1] != "x5" {
		t.Fatalf("thread turns: %v", th.RequestIDs)
	}
	if len(th.Tasks) != MaxThreadTurns {
		t.Fatalf("thread tasks: %v", th.Tasks)
	}
	for _, id := range th.RequestIDs {
		if task, ok := th.TaskOf(id); !ok || task != "up-"+id {
			t.Fatalf("task of %s: %q %v (%v)", id, task, ok, th.Tasks)
		}
	}
}

// TestThreadBaseline: a thread keeps the baseline of one request, its
// latest recorded (SetBaseline), none larger than MaxBaseline, and drops
// it when the thread no longer keeps its request; a record written
// without one (an earlier bridge's) reads, and has none.
func TestThreadBaseline(t *testing.T) {
	var c Conversation
	env := &e2a.Envelope{RequestID: "r0", ContextID: "c", TaskID: "t"}
	th := c.thread(env, 1)
	if !th.SetBaseline("r0", json.RawMessage(`{"a":[]}`)) {
		t.Fatal("a small baseline is not kept")
	}
	if th.SetBaseline("r0", json.RawMessage(`"`+strings.Repeat("x", MaxBaseline)+`"`)) {
		t.Fatal("a baseline larger than MaxBaseline is kept")
	}
	if b, ok := th.BaselineOf("r0"); !ok || string(b) != `{"a":[]}` {
		t.Fatalf("baseline of r0: %s %v", b, ok)
	}
	for i := 1; i < MaxThreadTurns; i++ {
		env.RequestID = "r" + strconv.Itoa(i)
		c.thread(env, int64(1+i))
	}
	if _, ok := c.Threads["task:t"].BaselineOf("r0"); !ok {
		t.Fatal("the baseline of a request the thread keeps is dropped")
	}
	if _, ok := c.Threads["task:t"].BaselineOf("r1"); ok {
		t.Fatal("a request that recorded none has a baseline")
	}
	env.RequestID = "r9"
	c.thread(env, 99)
	if b := c.Threads["task:t"].Baseline; b != nil {
		t.Fatalf("the baseline of a request the thread no longer keeps: %+v", b)
	}
	var old Conversation
	if err := json.Unmarshal([]byte(`{"upstream_task_id":"u","threads":{"task:t":{"upstream_task_id":"u","request_ids":["r0"],"upstream_tasks":{"r0":"u"}}}}`), &old); err != nil {
		t.Fatal(err)
	}
	if _, ok := old.Thread(&e2a.Envelope{RequestID: "r1", TaskID: "t"}).BaselineOf("r0"); ok {
		t.Fatal("a record without a baseline has one")
	}
}
