package push_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

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
