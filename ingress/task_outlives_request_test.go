package ingress_test

import (
	"context"
	"encoding/json"
	"net/http"
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
	const alice, bob = "ak_alice_0123456789abcdef", "ak_bob_0123456789abcdefgh"
	_, nc := natstest.RunServer(t)
	hist, err := audit.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p := pipetest.Start(t, pipetest.WithConn(nc), pipetest.WithEgress(egress.WithHistory(hist)),
		pipetest.WithIngress(ingress.WithAuth(pipetest.KeyAuth(t, map[string]string{"alice": alice, "bob": bob}, nil))))
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
	v1 := []string{"A2A-Version", "1.0", "Content-Type", "application/json"}
	_, b := do(t, "POST", p.URL+"/a2a/v1/message:send", `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]},"configuration":{"returnImmediately":true}}`,
		append([]string{"X-Api-Key", alice}, v1...)...)
	var sent struct{ Task struct{ ID string } }
	if json.Unmarshal(b, &sent) != nil || sent.Task.ID == "" {
		t.Fatalf("SendMessage: %s", b)
	}
	id := sent.Task.ID
	testkit.Receive(t, started, 20*time.Second, "the handler did not start")
	hot := natstest.AuditedMsgs(t, p.JS)
	testkit.Eventually(t, 15*time.Second, "E2A_AUDIT copied the hot streams", func() bool {
		return streamMsgs(t, p.JS, streams.AuditStream) >= hot
	})
	natstest.Purge(t, p.JS, streams.RequestsStream) // aged out: the request runs on

	task := func(key string) (int, string) {
		resp, b := do(t, "GET", p.URL+"/a2a/v1/tasks/"+id, "", append([]string{"X-Api-Key", key}, v1...)...)
		return resp.StatusCode, string(b)
	}
	if code, b := task(alice); code != http.StatusOK || !strings.Contains(b, "TASK_STATE_WORKING") {
		t.Errorf("the owner's GetTask of the running task whose request aged out: %d %s, want 200 working", code, b)
	}
	if code, b := task(bob); code != http.StatusNotFound {
		t.Errorf("another principal's GetTask: %d %s, want 404", code, b)
	}
	cancelTask := func(key string) (int, string) {
		resp, b := do(t, "POST", p.URL+"/a2a/v1/tasks/"+id+":cancel", "{}", append([]string{"X-Api-Key", key}, v1...)...)
		return resp.StatusCode, string(b)
	}
	if code, b := cancelTask(bob); code != http.StatusNotFound {
		t.Errorf("another principal's CancelTask: %d %s, want 404", code, b)
	}
	if code, b := cancelTask(alice); code != http.StatusOK {
		t.Fatalf("the owner's CancelTask: %d %s, want 200", code, b)
	}
	testkit.Receive(t, stopped, 20*time.Second, "the owner's cancel did not reach the handler")
	testkit.Eventually(t, 15*time.Second, "the task canceled", func() bool {
		_, b := task(alice)
		return strings.Contains(b, "TASK_STATE_CANCELED")
	})
}
