package ingress_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestPushFollowsQueuedTurn: a task with an A2A v1.0 push config (made
// with the a2a-go/v2 client) and a v0.3 one (the a2a-go v0.3 client);
// its turn "Paris" runs while the turn "Rome" is queued behind it. Each
// webhook gets no terminal state before the task's end (issue 38 §3, as
// the turn's stream writes it): Paris's final status update is posted
// submitted (v1.0), the v0.3 Task then is submitted with Rome's message
// last in its history, as tasks/get answers while Rome waits; then
// Rome's updates, the last one the task completed with both replies.
// Before, Paris's end was posted completed, and the task then went back
// to working.
func TestPushFollowsQueuedTurn(t *testing.T) {
	pt := startPushedParis(t)
	queueRome(t, pt.ctx, pt.g, pt.c, pt.task)
	if err := <-pt.paris; err != nil {
		t.Fatalf("Paris: %v", err)
	}
	r := pt.r

	v1 := awaitRome(t, r, "/v1", "TASK_STATE_COMPLETED")
	noEarlyEnd(t, "v1.0", v1, func(s string) bool { return a2a.TaskState(s).Terminal() })
	if !slices.ContainsFunc(v1, func(d pushtest.Delivery) bool { return d.State == string(a2a.TaskStateSubmitted) }) {
		t.Errorf("v1.0: Paris's end was not posted submitted:\n%s", states(v1))
	}
	v03 := awaitRome(t, r, "/v03", string(a2a03.TaskStateCompleted))
	noEarlyEnd(t, "v0.3", v03, func(s string) bool { return a2a03.TaskState(s).Terminal() })
	waiting := slices.IndexFunc(v03, func(d pushtest.Delivery) bool { return d.State == string(a2a03.TaskStateSubmitted) })
	if waiting < 0 {
		t.Fatalf("v0.3: no Task posted submitted at Paris's end:\n%s", states(v03))
	}
	var w a2a03.Task
	if err := json.Unmarshal(v03[waiting].Body, &w); err != nil {
		t.Fatal(err)
	}
	if n := len(w.History); n == 0 || w.History[n-1].Role != a2a03.MessageRoleUser || !strings.Contains(string(v03[waiting].Body), "Hello, Paris") {
		t.Errorf("v0.3 Task while Rome waits: %s\nwant Paris's reply, then Rome's message last in history", v03[waiting].Body)
	} else if tp, ok := w.History[n-1].Parts[0].(a2a03.TextPart); !ok || tp.Text != "Rome" {
		t.Errorf("v0.3 Task while Rome waits: last history message %+v, want Rome's", w.History[n-1])
	}
}

// pushedParis is a queuedTask holding "Paris" and "Rome" with the push
// stage: its task asked (input-required, by the a2a-go/v2 client c), an
// A2A v1.0 push config on it (r's /v1, made with c) and a v0.3 one (r's
// /v03, made with the a2a-go v0.3 client), and Paris's blocking answer
// sent (paris gets its result) and running, held at its gate.
type pushedParis struct {
	g     *queuedTask
	ctx   context.Context
	c     *a2aclient.Client
	task  *a2a.Task
	r     *pushtest.Receiver
	paris chan error
}

func startPushedParis(t *testing.T) *pushedParis {
	t.Helper()
	p := pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithPush("127.0.0.1"), pipetest.WithIngress(ingress.WithDefaultPool("gated")))
	pt := &pushedParis{g: startQueuedTaskOn(t, p, helloReply, "Paris", "Rome"), r: pushtest.NewReceiver(t), paris: make(chan error, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	pt.ctx, pt.c = ctx, up.Client(t, pt.g.URL)
	pt.task = up.Asked(t, ctx, pt.c, up.Msg("the weather"))
	if _, err := pt.c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: pt.task.ID, ID: "v1", URL: pt.r.URL + "/v1", Token: "tok-v1"}); err != nil {
		t.Fatalf("CreateTaskPushConfig: %v", err)
	}
	if _, err := v03ClientAt(t, pt.g.URL).SetTaskPushConfig(ctx, &a2a03.TaskPushConfig{TaskID: a2a03.TaskID(pt.task.ID),
		Config: a2a03.PushConfig{ID: "v03", URL: pt.r.URL + "/v03", Token: "tok-v03"}}); err != nil {
		t.Fatalf("tasks/pushNotificationConfig/set: %v", err)
	}
	go func() {
		_, err := pt.c.SendMessage(ctx, up.Reply(pt.task, "Paris"))
		pt.paris <- err
	}()
	if s := testkit.Receive(t, pt.g.started, 10*time.Second, "Paris started"); s != "Paris" {
		t.Fatalf("started %q", s)
	}
	return pt
}

// sendRome sends Rome's blocking answer (its result to the returned
// channel) and waits until the task's record lists it behind Paris; it
// returns the record then.
func (pt *pushedParis) sendRome(t *testing.T) (*ingress.TaskRecord, <-chan error) {
	t.Helper()
	rome := make(chan error, 1)
	go func() {
		_, err := pt.c.SendMessage(pt.ctx, up.Reply(pt.task, "Rome"))
		rome <- err
	}()
	testkit.Eventually(t, 10*time.Second, "Rome recorded behind Paris", func() bool {
		return len(record(t, pt.g.JS, ingress.KindTask, string(pt.task.ID)).RequestIDs) == 3
	})
	return record(t, pt.g.JS, ingress.KindTask, string(pt.task.ID)), rome
}

// awaitRome waits until path got the task's last update (state) after
// Rome's reply, and returns its deliveries, one per update (a
// redelivery's duplicate left out).
func awaitRome(t *testing.T, r *pushtest.Receiver, path, state string) []pushtest.Delivery {
	t.Helper()
	var ds []pushtest.Delivery
	testkit.Eventually(t, 20*time.Second, path+": Rome's reply, then the task "+state, func() bool {
		ds = r.Of(path)
		return len(ds) > 0 && ds[len(ds)-1].State == state &&
			slices.ContainsFunc(ds, func(d pushtest.Delivery) bool { return strings.Contains(string(d.Body), "Hello, Rome") })
	})
	seen := map[string]bool{}
	return slices.DeleteFunc(ds, func(d pushtest.Delivery) bool {
		dup := seen[d.EventID]
		seen[d.EventID] = true
		return dup
	})
}

// noEarlyEnd fails when an update before the last is in a terminal state.
func noEarlyEnd(t *testing.T, what string, ds []pushtest.Delivery, terminal func(string) bool) {
	t.Helper()
	for i, d := range ds[:len(ds)-1] {
		if terminal(d.State) {
			t.Fatalf("%s: update %d of %d (%s) says the task ended %s while Rome's turn was queued:\n%s", what, i+1, len(ds), d.EventID, d.State, states(ds))
		}
	}
}

// states lists the deliveries' event ids, kinds and states.
func states(ds []pushtest.Delivery) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.EventID + " " + d.Kind + " " + d.State + "\n")
	}
	return b.String()
}
