package ingress_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/audit"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// The keys of the principals of the one-turn task tests.
const agedAlice, agedBob = "ak_alice_0123456789abcdef", "ak_bob_0123456789abcdefgh"

// agedTask is alice's A2A task of one turn, running (its handler runs
// until cancelled, stopped told when it returns), on a pipeline with the
// audit history, which has copied the hot streams.
type agedTask struct {
	p       *pipetest.Pipeline
	id      string
	stopped chan struct{}
}

// startAgedTask starts an agedTask.
func startAgedTask(t *testing.T) *agedTask {
	t.Helper()
	_, nc := natstest.RunServer(t)
	hist, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p := pipetest.Start(t, pipetest.WithConn(nc), pipetest.WithEgress(egress.WithHistory(hist)),
		pipetest.WithIngress(ingress.WithAuth(pipetest.KeyAuth(t, map[string]string{"alice": agedAlice, "bob": agedBob}, nil))))
	started, stopped := make(chan struct{}, 1), make(chan struct{}, 1)
	p.Pool("demo", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Chunk(e2a.DeltaText, "thinking"); err != nil {
			return err
		}
		if err := w.Sync(); err != nil {
			return err
		}
		started <- struct{}{}
		<-ctx.Done() // runs until cancelled
		stopped <- struct{}{}
		return ctx.Err()
	}))
	a := &agedTask{p: p, stopped: stopped}
	_, b := a.call(t, "POST", "/message:send", `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]},"configuration":{"returnImmediately":true}}`, agedAlice)
	var sent struct{ Task struct{ ID string } }
	if json.Unmarshal([]byte(b), &sent) != nil || sent.Task.ID == "" {
		t.Fatalf("SendMessage: %s", b)
	}
	a.id = sent.Task.ID
	testkit.Receive(t, started, 20*time.Second, "the handler did not start")
	hot := natstest.AuditedMsgs(t, p.JS)
	testkit.Eventually(t, 15*time.Second, "E2A_AUDIT copied the hot streams", func() bool {
		return streamMsgs(t, p.JS, streams.AuditStream) >= hot
	})
	return a
}

// call makes an A2A v1.0 HTTP+JSON call (path after /a2a/v1) with key.
func (a *agedTask) call(t *testing.T, method, path, body, key string) (int, string) {
	t.Helper()
	resp, b := do(t, method, a.p.URL+"/a2a/v1"+path, body, "X-Api-Key", key, "A2A-Version", "1.0", "Content-Type", "application/json")
	return resp.StatusCode, string(b)
}

// task is GetTask of the task with key.
func (a *agedTask) task(t *testing.T, key string) (int, string) {
	t.Helper()
	return a.call(t, "GET", "/tasks/"+a.id, "", key)
}

// listed reports whether ListTasks with key lists the task.
func (a *agedTask) listed(t *testing.T, key string) bool {
	t.Helper()
	code, b := a.call(t, "GET", "/tasks", "", key)
	var l struct{ Tasks []struct{ ID string } }
	if code != http.StatusOK || json.Unmarshal([]byte(b), &l) != nil {
		t.Fatalf("ListTasks: %d %s", code, b)
	}
	return slices.ContainsFunc(l.Tasks, func(x struct{ ID string }) bool { return x.ID == a.id })
}

// TestOneTurnTaskOutlivesItsRequest: an A2A task of one turn has no record
// in E2A_TASKS, its request stands for it; a task running longer than
// E2A_REQUESTS_MAX_AGE (an agent waiting hours on a model or a human) lost
// that request to the stream's age limit while it ran (the purge below
// stands for it), and was not found: GetTask and CancelTask answered
// TaskNotFound to its owner, so the agent ran on and nobody could stop
// it. Its request is now read from the audit history (E2A_HISTORY) while
// E2A_RESPONSES holds a frame of it: its owner reads and cancels it,
// another principal is still told it does not exist, and cannot cancel it.
func TestOneTurnTaskOutlivesItsRequest(t *testing.T) {
	a := startAgedTask(t)
	natstest.Purge(t, a.p.JS, streams.RequestsStream) // aged out: the request runs on

	if code, b := a.task(t, agedAlice); code != http.StatusOK || !strings.Contains(b, "TASK_STATE_WORKING") {
		t.Errorf("the owner's GetTask of the running task whose request aged out: %d %s, want 200 working", code, b)
	}
	if code, b := a.task(t, agedBob); code != http.StatusNotFound {
		t.Errorf("another principal's GetTask: %d %s, want 404", code, b)
	}
	cancelTask := func(key string) (int, string) {
		return a.call(t, "POST", "/tasks/"+a.id+":cancel", "{}", key)
	}
	if code, b := cancelTask(agedBob); code != http.StatusNotFound {
		t.Errorf("another principal's CancelTask: %d %s, want 404", code, b)
	}
	if code, b := cancelTask(agedAlice); code != http.StatusOK {
		t.Fatalf("the owner's CancelTask: %d %s, want 200", code, b)
	}
	testkit.Receive(t, a.stopped, 20*time.Second, "the owner's cancel did not reach the handler")
	testkit.Eventually(t, 15*time.Second, "the task canceled", func() bool {
		_, b := a.task(t, agedAlice)
		return strings.Contains(b, "TASK_STATE_CANCELED")
	})
}

// TestListTasksOneTurnTaskOutlivesItsRequest: GetTask finds the running
// one-turn task whose request aged out of E2A_REQUESTS in the audit
// history (TestOneTurnTaskOutlivesItsRequest), and ListTasks omitted it:
// the listing reads the first turns of the newest requests E2A_REQUESTS
// holds. The replica that listed it while its request was there lists it
// now as long as GetTask finds it (its owner only: another principal's
// listing never shows it), and no longer once it does not (cancelled,
// and its frames gone too).
func TestListTasksOneTurnTaskOutlivesItsRequest(t *testing.T) {
	a := startAgedTask(t)
	if !a.listed(t, agedAlice) || a.listed(t, agedBob) {
		t.Fatalf("ListTasks before the request aged out: the owner's lists it %v, another's %v; want true, false", a.listed(t, agedAlice), a.listed(t, agedBob))
	}
	natstest.Purge(t, a.p.JS, streams.RequestsStream) // aged out: the request runs on
	if code, b := a.task(t, agedAlice); code != http.StatusOK {
		t.Fatalf("the owner's GetTask of the running task whose request aged out: %d %s, want 200", code, b)
	}
	if !a.listed(t, agedAlice) {
		t.Error("the owner's ListTasks omits the running task whose request aged out, which GetTask finds")
	}
	if a.listed(t, agedBob) {
		t.Error("another principal's ListTasks lists the task")
	}
	if code, b := a.call(t, "POST", "/tasks/"+a.id+":cancel", "{}", agedAlice); code != http.StatusOK {
		t.Fatalf("the owner's CancelTask: %d %s, want 200", code, b)
	}
	testkit.Receive(t, a.stopped, 20*time.Second, "the owner's cancel did not reach the handler")
	natstest.Purge(t, a.p.JS, streams.ResponsesStream) // its frames aged out too
	if code, b := a.task(t, agedAlice); code != http.StatusNotFound {
		t.Fatalf("the owner's GetTask of the task whose frames aged out too: %d %s, want 404", code, b)
	}
	if a.listed(t, agedAlice) {
		t.Error("the owner's ListTasks lists the task GetTask no longer finds")
	}
}
