package bridge

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestConversations: Update and Get keep a conversation per pool,
// principal and conversation id; History returns its stored turns, oldest
// first, without the current one; a principal naming another's context id
// reaches a conversation of its own; concurrent updates all land.
func TestConversations(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	convs, err := OpenConversations(ctx, js, natstest.Config())
	if err != nil {
		t.Fatal(err)
	}
	// Two turns of alice's context ctx-1, stored as ingress and an agent
	// store them: the envelope, and the frames with a final one.
	store := func(id, user, ctxID string, final bool) *e2a.Envelope {
		env := &e2a.Envelope{RequestID: id, UserID: user, ContextID: ctxID, Params: map[string]any{"text": "turn " + id}}
		b, err := e2a.MarshalEnvelope(env)
		if err != nil {
			t.Fatal(err)
		}
		subj, _ := subjects.Request("p", id)
		if _, err := js.Publish(ctx, subj, b); err != nil {
			t.Fatal(err)
		}
		seq := natstest.PublishBurst(t, nc, id, 0, 0, natstest.Frame(id, 0, false))
		if final {
			natstest.PublishBurst(t, nc, id, 1, seq, natstest.Frame(id, 1, true))
		}
		return env
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
	turns, err := convs.History(ctx, "p", a3, conv)
	if err != nil || len(turns) != 2 || turns[0].Envelope.RequestID != "a1" || turns[1].Envelope.RequestID != "a2" {
		t.Fatalf("History: %+v %v", turns, err)
	}
	if turns[0].Final == nil || !turns[0].Final.IsFinal || turns[1].Final != nil {
		t.Fatalf("History finals: %+v, %+v", turns[0].Final, turns[1].Final)
	}

	// Mallory names alice's context: a conversation of her own, empty.
	m1 := store("m1", "mallory", "ctx-1", true)
	if conv, found, err := convs.Get(ctx, "p", m1); err != nil || found {
		t.Fatalf("mallory reached %+v (%v)", conv, err)
	}
	// Even given alice's conversation record, History returns none of
	// alice's turns to mallory (the envelopes' user_id is checked again).
	if turns, err := convs.History(ctx, "p", m1, conv); err != nil || len(turns) != 0 {
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
