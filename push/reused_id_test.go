package push_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// ctxOf is the context of user's task in these tests.
func ctxOf(user, task string) string { return "ctx-" + user + "-" + task }

// storeRequest stores user's request id of task in a pool no agent
// serves: the test writes its frames (storeFrame).
func storeRequest(t *testing.T, e *env, id, user, task string) {
	t.Helper()
	natstest.PublishRequest(t, e.js, "noagent", &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: id,
		Method: "message/stream", IsStream: true, UserID: user, TaskID: task, ContextID: ctxOf(user, task), Channel: "test",
		Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceE2A}}, subjects.HeaderMsgID, id+"-"+user+"-"+task)
}

// storeFrame stores frame seq of request id of task, naming user: a text
// chunk, or with final the completion.
func storeFrame(t *testing.T, e *env, id, user, task string, seq int64, text string, final bool) {
	t.Helper()
	f := &e2a.Response{ProtocolVersion: e2a.ProtocolVersion, ResponseID: id + "-" + strconv.FormatInt(seq, 10), RequestID: id,
		Sequence: seq, IsFinal: final, Status: e2a.StatusInProgress, ResponseKind: e2a.KindChunk, Timestamp: e2a.Now(),
		Provenance: e2a.Provenance{SourceProtocol: e2a.SourceE2A}, TaskID: task, ContextID: ctxOf(user, task), UserID: user, IsStream: true}
	body := any(e2a.ChunkBody{DeltaKind: "text", Delta: text})
	if final {
		f.Status, f.ResponseKind, body = e2a.StatusSucceeded, e2a.KindComplete, e2a.CompleteBody{}
	}
	var err error
	if f.Body, err = json.Marshal(body); err != nil {
		t.Fatal(err)
	}
	data, err := e2a.MarshalResponse(f)
	if err != nil {
		t.Fatal(err)
	}
	subj, _ := subjects.Response(id)
	m := nats.NewMsg(subj)
	m.Data = data
	m.Header.Set(subjects.HeaderSequence, strconv.FormatInt(seq, 10))
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// TestReusedRequestIDNotPushedToFirstOwner: a request id is taken again
// once the hot streams no longer hold its request (ingress allows it:
// nothing of it is stored), here by another principal. The stage delivers
// the new request's updates to its own principal's configs only: nothing
// of bob's request reaches the config of alice, whose completed request
// (her task, named by its first request's id as an A2A Idempotency-Key
// names it) had the id before, and which the stage handled and
// remembered.
func TestReusedRequestIDNotPushedToFirstOwner(t *testing.T) {
	e := newEnv(t)
	e.startStage()
	alice, bob := newReceiver(t, nil), newReceiver(t, nil)
	const id = "shared-task-key"
	e.create("alice", push.Config{TaskID: id, URL: alice.srv.URL})
	publish := func(user, label, msgID string) {
		natstest.PublishRequest(t, e.js, pool, &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: id, Method: "message/stream",
			IsStream: true, UserID: user, TaskID: id, ContextID: "ctx-" + user, Channel: "test",
			Params:     map[string]any{"chunks": float64(1), "turn": label},
			Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceE2A}}, subjects.HeaderMsgID, msgID)
	}
	publish("alice", "alice-text-", id)
	e.handled("alice", id, alice)
	before := len(alice.all())
	// Later: her request and frames aged out of the hot streams, and bob
	// takes the id for a task of his own, with a config.
	natstest.Purge(t, e.js, streams.RequestsStream, streams.ResponsesStream)
	e.create("bob", push.Config{TaskID: id, URL: bob.srv.URL})
	publish("bob", "bob-secret-", id+"-bob")
	testkit.Eventually(t, 30*time.Second, "bob's request delivered to bob (or to alice)", func() bool {
		return len(alice.all()) > before || completedCount(t, push.V1, bob.accepted()) == 1
	})
	if got := alice.all(); len(got) > before {
		t.Fatalf("alice's webhook got an update of bob's request under the reused id: %.300s", got[before].body)
	}
	e.handled("bob", id, bob)
	ordered(t, push.V1, bob.accepted(), []string{"bob-secret-"}, expectText([]string{"bob-secret-"}, 1))
	for _, d := range bob.all() {
		if strings.Contains(string(d.body), "alice") {
			t.Errorf("bob's webhook got alice's context: %.300s", d.body)
		}
	}
	if got := alice.all(); len(got) != before {
		t.Errorf("alice's webhook got %d more calls after bob's request", len(got)-before)
	}
}

// TestReusedRequestIDAfterUnfinishedRequest: alice's request never ended
// (the stage keeps its mapper and its v0.3 task) when its id is taken
// again: by bob, whose frames name him (an agent's, e2a.ResponseFor) or no
// one (an integrator's frames may carry no user_id), or by alice for
// another task. The stage maps the new request's frames from its own
// envelope to its own task's config: its v0.3 task holds nothing of the
// first request, and the first request's config gets nothing of it.
func TestReusedRequestIDAfterUnfinishedRequest(t *testing.T) {
	const id = "shared-task-key"
	for _, c := range []struct{ name, user, task, frameUser string }{
		{"another principal", "bob", id, "bob"},
		{"frames naming no one", "bob", id, ""},
		{"another task", "alice", "other-task", "alice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.startStage()
			first, second := newReceiver(t, nil), newReceiver(t, nil)
			e.create("alice", push.Config{TaskID: id, URL: first.srv.URL, Version: push.V03})
			storeRequest(t, e, id, "alice", id)
			storeFrame(t, e, id, "alice", id, 0, "first-text;", false)
			testkit.Eventually(t, 30*time.Second, "the first request's update delivered", func() bool { return len(first.accepted()) == 1 })
			// It never ends; later it has aged out of the hot streams, and
			// its id is taken again.
			natstest.Purge(t, e.js, streams.RequestsStream, streams.ResponsesStream)
			e.create(c.user, push.Config{TaskID: c.task, URL: second.srv.URL, Version: push.V03})
			storeRequest(t, e, id, c.user, c.task)
			storeFrame(t, e, id, c.frameUser, c.task, 0, "second-text;", false)
			storeFrame(t, e, id, c.frameUser, c.task, 1, "", true)
			testkit.Eventually(t, 30*time.Second, "the second request delivered (to its config or the first's)", func() bool {
				return len(first.all()) > 1 || completedCount(t, push.V03, second.accepted()) == 1
			})
			if got := first.all(); len(got) > 1 {
				t.Fatalf("the first request's webhook got an update of the second: %.300s", got[1].body)
			}
			ordered(t, push.V03, second.accepted(), []string{id}, "second-text;")
			for _, d := range second.all() {
				if strings.Contains(string(d.body), "first-text") || strings.Contains(string(d.body), ctxOf("alice", id)) {
					t.Errorf("the second request's webhook got the first request's task: %.300s", d.body)
				}
			}
		})
	}
}

// storeTurnOf stores user's request id of task after the turn after (""
// for the first), its Nats-Msg-Id its own (a request id taken again is
// not a duplicate), asking user+"-asks;", and its two frames: text, then
// the final one.
func storeTurnOf(t *testing.T, e *env, user, id, task, after, text string) {
	t.Helper()
	h := []string{subjects.HeaderMsgID, user + "/" + id}
	if after != "" {
		h = append(h, subjects.HeaderAfterRequest, after)
	}
	natstest.PublishRequest(t, e.js, "noagent", &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: id,
		Method: "message/stream", IsStream: true, UserID: user, TaskID: task, ContextID: ctxOf(user, task), Channel: "test",
		Params: map[string]any{"text": user + "-asks;"}, Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceE2A}}, h...)
	storeFrame(t, e, id, user, task, 0, text, false)
	storeFrame(t, e, id, user, task, 1, "", true)
}

// purgeRequest removes what E2A_REQUESTS (and with responses
// E2A_RESPONSES) holds of request id of the pool noagent, as their max
// age removes it.
func purgeRequest(t *testing.T, e *env, id string, responses bool) {
	t.Helper()
	req, err := subjects.Request("noagent", id)
	if err != nil {
		t.Fatal(err)
	}
	subjs := map[string]string{streams.RequestsStream: req}
	if responses {
		if subjs[streams.ResponsesStream], err = subjects.Response(id); err != nil {
			t.Fatal(err)
		}
	}
	for stream, subj := range subjs {
		st, err := e.js.Stream(tctx(t), stream)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Purge(tctx(t), jetstream.WithPurgeSubject(subj)); err != nil {
			t.Fatal(err)
		}
	}
}

// completedBy3 is completedBy for a v0.3 receiver.
func completedBy3(t testing.TB, r *receiver) map[string]bool {
	out := map[string]bool{}
	for _, d := range r.accepted() {
		if u := decode(t, push.V03, d); u.state == "completed" {
			req, _, _ := splitID(d.eventID)
			out[req] = true
		}
	}
	return out
}

// TestV03TaskNotFollowedIntoAReusedTurn: a v0.3 body is the task built
// over its earlier turns, found by following E2A-After-Request back
// (turns), each turn's envelope and frames read by request id. A request
// id is free again once the hot streams no longer hold it (ingress
// checkRequestID asks egress.StoredOwner), while a task's record and
// later turns outlive its first turn (E2A_TASKS_TTL 72 h; requests and
// frames 24 h). Alice's task has turns X then L; X ages out of
// E2A_REQUESTS and E2A_RESPONSES; bob takes the id X for a request of his
// own task (its envelope kept, or aged out too while his frames are
// kept); alice's next turn M is posted to her v0.3 webhook as a Task of
// her turns only: a turn whose envelope names another principal or task
// ends the turns followed, and a gone turn's frames naming another are
// left out. (They held bob's request and his agent's answer.)
func TestV03TaskNotFollowedIntoAReusedTurn(t *testing.T) {
	for _, gone := range []bool{false, true} {
		t.Run(fmt.Sprintf("his envelope gone=%v", gone), func(t *testing.T) {
			e := newEnvOn(t)
			e.startStage()
			r := newReceiver(t, nil)
			e.create("alice", push.Config{TaskID: "mine", URL: r.srv.URL, Version: push.V03})
			storeTurnOf(t, e, "alice", "turn-x", "mine", "", "alice-x;")
			storeTurnOf(t, e, "alice", "turn-l", "mine", "turn-x", "alice-l;")
			testkit.Eventually(t, 10*time.Second, "alice's two turns delivered", func() bool {
				return completedCount(t, push.V03, r.accepted()) >= 2 && consumerIdle(t, e)
			})
			purgeRequest(t, e, "turn-x", true)
			storeTurnOf(t, e, "bob", "turn-x", "his", "", "bob-secret;")
			if gone {
				purgeRequest(t, e, "turn-x", false)
			}
			n := len(r.accepted())
			storeTurnOf(t, e, "alice", "turn-m", "mine", "turn-l", "alice-m;")
			testkit.Eventually(t, 10*time.Second, "alice's turn M delivered", func() bool {
				return completedBy3(t, r)["turn-m"]
			})
			for _, d := range r.accepted()[n:] {
				if strings.Contains(string(d.body), "bob-") {
					t.Fatalf("alice's v0.3 webhook got bob's turn in her Task (update %s): %s", d.eventID, d.body)
				}
				if !strings.Contains(string(d.body), "alice-l;") || !strings.Contains(string(d.body), "alice-asks;") {
					t.Fatalf("alice's v0.3 Task (update %s) lost her turn L: %s", d.eventID, d.body)
				}
			}
		})
	}
}
