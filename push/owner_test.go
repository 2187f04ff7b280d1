package push_test

import (
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// storeOwnedRequest stores request id of task by user, a turn of owner's
// conversation as ingress writes an admin's turn of another principal's
// task (provenance.details conversation_owner: e2a.Envelope.SetOwner),
// under its own Nats-Msg-Id (a request id taken again is no duplicate).
func storeOwnedRequest(t *testing.T, e *env, id, user, owner, task string) {
	t.Helper()
	en := &e2a.Envelope{ProtocolVersion: e2a.ProtocolVersion, RequestID: id, Method: "message/stream", IsStream: true,
		UserID: user, TaskID: task, ContextID: ctxOf(owner, task), Channel: "test",
		Params: map[string]any{"text": user + "-for-" + owner}, Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceE2A}}
	en.SetOwner(owner)
	natstest.PublishRequest(t, e.js, "noagent", en, subjects.HeaderMsgID, id+"/"+user+"/"+owner)
}

// TestReusedIDCachedOwnerNotPushed: an admin (ops) answers alice's task
// "rv-shared-task" under a request id he chose; the stage posts it to
// alice's config (the envelope names alice as the conversation's owner).
// Later everything of it has aged out of the hot streams: carol takes the
// task id for a task of hers, and ops answers it under the same request
// id (both ids are the clients' to choose, and free again). carol's
// webhook gets that answer, alice's nothing. The stage's request cache
// served the stale entry before (its check compares the frames' user_id
// and task_id, the same here, and frames carry no owner), so alice's
// webhook got carol's answer and carol's nothing: an entry whose owner is
// another than its principal is read again for every message.
func TestReusedIDCachedOwnerNotPushed(t *testing.T) {
	e := newEnv(t)
	e.startStage()
	alice, carol := newReceiver(t, nil), newReceiver(t, nil)
	const task, id = "rv-shared-task", "rv-admin-answer"
	e.create("alice", push.Config{TaskID: task, URL: alice.srv.URL})
	storeOwnedRequest(t, e, id, "ops", "alice", task)
	storeFrame(t, e, id, "ops", task, 0, "alice-answer;", false)
	storeFrame(t, e, id, "ops", task, 1, "", true)
	e.handled("alice", task, alice)
	before := len(alice.all())
	natstest.Purge(t, e.js, streams.RequestsStream, streams.ResponsesStream)
	e.create("carol", push.Config{TaskID: task, URL: carol.srv.URL})
	storeOwnedRequest(t, e, id, "ops", "carol", task)
	storeFrame(t, e, id, "ops", task, 0, "carol-secret;", false)
	storeFrame(t, e, id, "ops", task, 1, "", true)
	testkit.Eventually(t, 30*time.Second, "the admin's answer of carol's task delivered (to carol, or to alice)", func() bool {
		return len(alice.all()) > before || completedCount(t, push.V1, carol.accepted()) == 1
	})
	for _, d := range alice.all()[before:] {
		t.Errorf("alice's webhook got an update of carol's task: %.300s", d.body)
	}
	if len(alice.all()) == before {
		ordered(t, push.V1, carol.accepted(), []string{id}, "carol-secret;")
	} else if got := carol.all(); len(got) == 0 {
		t.Errorf("carol's webhook got nothing of the admin's answer of her task")
	}
	for _, d := range carol.all() {
		if strings.Contains(string(d.body), "alice") {
			t.Errorf("carol's webhook got alice's context: %.300s", d.body)
		}
	}
}
