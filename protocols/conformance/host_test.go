package conformance_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/render"
)

// TestHost: the fake host refuses with its Refusal, publishes (or fails
// with PublishErr) and records, holds and gives back stream slots, and
// serves a request's Frames through a renderer (here egress's NDJSON, as
// ServeE2A): one line per frame, in order.
func TestHost(t *testing.T) {
	h := &conformance.Host{}
	rec := httptest.NewRecorder()
	c, ok := h.Admit(rec, httptest.NewRequest(http.MethodPost, "/x", nil), "x", func(http.ResponseWriter, host.Refusal) {
		t.Fatal("refused")
	})
	if !ok {
		t.Fatal("not admitted")
	}
	sub, err := c.Submit(context.Background(), host.Submission{Pool: "echo", Envelope: &e2a.Envelope{RequestID: "r1", Method: "m"}, Slot: true})
	if err != nil || sub.RequestID != "r1" || len(h.Published()) != 1 || h.Pools()[0] != "echo" || h.Slots() != 1 {
		t.Fatalf("submit: %+v %v %v %d", sub, err, h.Published(), h.Slots())
	}
	sub.Done()
	sub.Done()
	if h.Slots() != 0 {
		t.Fatalf("%d slots after Done", h.Slots())
	}
	release, ok := c.StreamSlot(rec, nil)
	if !ok || h.Slots() != 1 {
		t.Fatalf("slot: %v %d", ok, h.Slots())
	}
	release()
	release()
	if h.Slots() != 0 {
		t.Fatalf("%d slots after release", h.Slots())
	}

	sc := conformance.Scenarios()[0]
	h.Frames = map[string][]*e2a.Response{sc.RequestID(): sc.Frames}
	rec = httptest.NewRecorder()
	h.ServeE2A(rec, httptest.NewRequest(http.MethodGet, "/x", nil), sc.RequestID())
	lines, err := conformance.NDJSONLines(rec.Body.Bytes())
	if err != nil || len(lines) != len(sc.Frames) {
		t.Fatalf("%d lines for %d frames (%v): %s", len(lines), len(sc.Frames), err, rec.Body)
	}
	for i, l := range lines {
		r, err := e2a.ResponseFromJSON(l)
		if err != nil || r.Sequence != sc.Frames[i].Sequence {
			t.Fatalf("line %d: %v %s", i, err, l)
		}
	}
	if s := h.Served(); len(s) != 1 || s[0] != sc.RequestID()+" e2a_ndjson" {
		t.Fatalf("served %v", s)
	}

	refused := &conformance.Host{Refusal: &host.Refusal{Status: 429, Code: "rate_limit_exceeded"}}
	var got host.Refusal
	if _, ok := refused.Admit(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/x", nil), "x", func(_ http.ResponseWriter, f host.Refusal) { got = f }); ok || got.Code != "rate_limit_exceeded" {
		t.Fatalf("admitted, or refused with %+v", got)
	}
	c2, _ := (&conformance.Host{NoSlot: true, PublishErr: host.ErrBackpressure}).Admit(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/x", nil), "x", nil)
	if _, err := c2.Submit(context.Background(), host.Submission{Pool: "echo", Envelope: &e2a.Envelope{RequestID: "r2"}}); !errors.Is(err, host.ErrBackpressure) {
		t.Fatalf("submit error %v", err)
	}
	if _, err := c2.Submit(context.Background(), host.Submission{Pool: "echo", Envelope: &e2a.Envelope{RequestID: "r3"}, Slot: true}); !errors.Is(err, host.ErrTooManyStreams) {
		t.Fatalf("submit error %v", err)
	}
	if _, ok := c2.StreamSlot(httptest.NewRecorder(), func(_ http.ResponseWriter, f host.Refusal) { got = f }); ok || got.Code != "too_many_streams" {
		t.Fatalf("slot given, or refused with %+v", got)
	}
}

// TestRPCHost: the JSON-RPC fake host keeps its caller's sessions (a
// second session of an id is refused), appends a session's turns to its
// record, replays a request's Frames (none: not found), reads back the
// envelopes it accepted, and cancels only the turns that have not ended,
// newest first.
func TestRPCHost(t *testing.T) {
	ctx := context.Background()
	h := &conformance.RPCHost{}
	c := h.Caller()
	if err := c.CreateSession(ctx, "acp", "s1", "echo"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateSession(ctx, "acp", "s1", "echo"); !errors.Is(err, host.ErrConflict) {
		t.Fatalf("a second session s1: %v", err)
	}
	if _, err := c.Session(ctx, "a2a", "s1", 0); !errors.Is(err, host.ErrSessionNotFound) {
		t.Fatalf("s1 as another protocol's: %v", err)
	}
	turn := &host.Turn{Task: host.Task{Session: host.Session{ID: "s1"}}, Session: true}
	for _, id := range []string{"r1", "r2"} {
		sub, err := c.Submit(ctx, host.Submission{Pool: "echo", Envelope: &e2a.Envelope{RequestID: id}, Turn: turn})
		if err != nil {
			t.Fatal(err)
		}
		sub.Done()
	}
	if s, err := c.Session(ctx, "acp", "s1", 0); err != nil || strings.Join(s.RequestIDs, ",") != "r1,r2" {
		t.Fatalf("session s1: %+v %v", s, err)
	}
	if env, _ := h.Envelope(ctx, "r2"); env == nil || env.RequestID != "r2" {
		t.Fatalf("envelope r2: %+v", env)
	}
	sc := conformance.Scenarios()[0]
	h.Frames = map[string][]*e2a.Response{"r1": sc.Frames}
	n := 0
	if err := h.Replay(ctx, "r1", func(render.Frame) error { n++; return nil }); err != nil || n != len(sc.Frames) {
		t.Fatalf("replay r1: %d frames, %v", n, err)
	}
	if err := h.Replay(ctx, "r2", func(render.Frame) error { return nil }); !errors.Is(err, egress.ErrNotFound) {
		t.Fatalf("replay r2: %v", err)
	}
	// r1's frames end (the scenario is final), r2 has none: only r2 runs.
	if !sc.Final {
		t.Fatal("the first scenario is not final")
	}
	if err := h.CancelTurns(ctx, &host.Session{RequestIDs: []string{"r1", "r2"}}); err != nil || strings.Join(h.Canceled(), ",") != "r2" {
		t.Fatalf("canceled %v %v", h.Canceled(), err)
	}
}

// TestBindingHost: the binding host admits a call by its key header,
// which names the principal and goes no further, and refuses one without
// it; a principal's tasks are its own (another's is not found, never
// listed, and takes no turn of it), a context is its first claimer's
// (another's claim publishes nothing), an ended task is terminal, a turn
// is recorded on its task (a created one makes it), taken off again when
// its publish fails, and wakes NextTurn.
func TestBindingHost(t *testing.T) {
	ctx := context.Background()
	h := &conformance.BindingHost{}
	var refused host.Refusal
	r := httptest.NewRequest(http.MethodPost, "/x", nil)
	if _, ok := h.Admit(httptest.NewRecorder(), r, "a2a", func(_ http.ResponseWriter, f host.Refusal) { refused = f }); ok ||
		refused.Status != http.StatusUnauthorized || refused.Code != "unauthenticated" {
		t.Fatalf("admitted without a key, or refused with %+v", refused)
	}
	r.Header.Set(conformance.DefaultKey, "alice")
	c, ok := h.Admit(httptest.NewRecorder(), r, "a2a", nil)
	if !ok || r.Header.Get(conformance.DefaultKey) != "" {
		t.Fatalf("admitted %v, key left %q", ok, r.Header.Get(conformance.DefaultKey))
	}
	alice := c.(host.BindingCaller)
	if _, f, _ := h.AdmitHeader(ctx, http.Header{}, "a2a", "grpc"); f == nil || f.Code != "unauthenticated" {
		t.Fatalf("a header without a key: %+v", f)
	}
	bob, f, err := h.AdmitHeader(ctx, http.Header{"X-Api-Key": {"bob"}}, "a2a", "grpc")
	if f != nil || err != nil {
		t.Fatal(f, err)
	}

	h.AddTask("alice", host.ListedTask{Task: host.Task{Session: host.Session{ID: "t1", RequestIDs: []string{"r0"}}, ContextID: "c1"}})
	if _, err := bob.Task(ctx, "t1", 0); !errors.Is(err, host.ErrSessionNotFound) {
		t.Fatalf("alice's task read by bob: %v", err)
	}
	if got, err := alice.Task(ctx, "t1", 0); err != nil || got.ContextID != "c1" {
		t.Fatalf("alice's task: %+v %v", got, err)
	}
	all := func(*host.ListedTask) bool { return true }
	if l, _ := bob.ListTasks(ctx, 0, all); len(l) != 0 {
		t.Fatalf("bob lists %d tasks", len(l))
	}
	if l, _ := alice.ListTasks(ctx, 0, all); len(l) != 1 || l[0].ID != "t1" {
		t.Fatalf("alice lists %+v", l)
	}
	claim := host.Submission{Pool: "echo", Envelope: &e2a.Envelope{RequestID: "r1", ContextID: "c1"}, ClaimContext: true}
	if _, err := bob.Submit(ctx, claim); !errors.Is(err, host.ErrConflict) {
		t.Fatalf("bob claims alice's context: %v", err)
	}
	turn := &host.Turn{Task: host.Task{Session: host.Session{ID: "t1"}, ContextID: "c1"}}
	if _, err := bob.Submit(ctx, host.Submission{Pool: "echo", Envelope: &e2a.Envelope{RequestID: "r1"}, Turn: turn}); !errors.Is(err, host.ErrConflict) {
		t.Fatalf("bob's turn of alice's task: %v", err)
	}
	if n := len(h.Published()); n != 0 {
		t.Fatalf("%d published for refused submissions", n)
	}

	next := make(chan string, 1)
	go func() {
		id, _ := alice.NextTurn(ctx, &host.Task{Session: host.Session{ID: "t1"}}, "r0")
		next <- id
	}()
	sub, err := alice.Submit(ctx, host.Submission{Pool: "echo", Envelope: &e2a.Envelope{RequestID: "r1", ContextID: "c1"}, ClaimContext: true, Turn: turn})
	if err != nil {
		t.Fatal(err)
	}
	sub.Done()
	if id := <-next; id != "r1" {
		t.Fatalf("next turn %q", id)
	}
	if rec, owner := h.Task("t1"); owner != "alice" || strings.Join(rec.RequestIDs, ",") != "r0,r1" {
		t.Fatalf("t1 of %s: %v", owner, rec.RequestIDs)
	}
	created := &host.Turn{Task: host.Task{Session: host.Session{ID: "t2"}, ContextID: "c2"}, Created: true}
	if _, err := bob.Submit(ctx, host.Submission{Pool: "echo", Envelope: &e2a.Envelope{RequestID: "r2", ContextID: "c2"}, ClaimContext: true, Turn: created}); err != nil {
		t.Fatal(err)
	}
	if got, err := bob.Task(ctx, "t2", 0); err != nil || strings.Join(got.RequestIDs, ",") != "r2" {
		t.Fatalf("bob's new task: %+v %v", got, err)
	}
	if err := h.ClaimContext("alice", "c2"); !errors.Is(err, host.ErrConflict) {
		t.Fatalf("alice claims bob's context: %v", err)
	}

	h.PublishErr = host.ErrBackpressure
	if _, err := alice.Submit(ctx, host.Submission{Pool: "echo", Envelope: &e2a.Envelope{RequestID: "r3"}, Turn: turn}); !errors.Is(err, host.ErrBackpressure) {
		t.Fatalf("a turn whose publish fails: %v", err)
	}
	h.PublishErr = nil
	if rec, _ := h.Task("t1"); strings.Join(rec.RequestIDs, ",") != "r0,r1" {
		t.Fatalf("t1 after a failed publish: %v", rec.RequestIDs)
	}

	t1, _ := alice.Task(ctx, "t1", 0)
	if err := alice.CheckTaskOpen(ctx, t1); err != nil {
		t.Fatal(err)
	}
	h.EndTask("t1")
	if err := alice.CheckTaskOpen(ctx, t1); !errors.Is(err, host.ErrTaskTerminal) {
		t.Fatalf("ended task: %v", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := alice.NextTurn(canceled, t1, "r1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("next turn after the context ended: %v", err)
	}
	h.NoSlot = true
	if _, ok := alice.AcquireStream(); ok {
		t.Fatal("a stream slot with NoSlot")
	}
}
