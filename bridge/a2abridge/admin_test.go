package a2abridge_test

import (
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

const (
	adminAliceKey = "ak_admin_alice_0123456789"
	adminOpsKey   = "ak_admin_ops_00123456789"
)

// adminPipeline is a pipeline whose pool "agent" bridges a fresh
// upstream, and the A2A v1.0 client of that pool. Its ingress knows two
// API keys: alice's, and ops's with the admin role (read, continue and
// cancel everyone's tasks: tenant.RoleAdmin, docs/security.md).
func adminPipeline(t *testing.T) (*up.Server, *a2aclient.Client) {
	t.Helper()
	srv := up.Start(t, up.Options{Binding: up.JSONRPC})
	auth := pipetest.KeyAuth(t, map[string]string{"alice": adminAliceKey, "ops": adminOpsKey}, map[string][]string{"ops": {"admin"}})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(auth)))
	bridgePool(t, p, "agent", srv.BaseURL())
	return srv, v1Client(t, p, "agent")
}

// askAsAlice sends alice's "ask:" message; it returns the pipeline's
// task, input-required, and the agent's task.
func askAsAlice(t *testing.T, c *a2aclient.Client, srv *up.Server, text string) (*a2a.Task, string) {
	t.Helper()
	task := up.Asked(t, up.WithAPIKey(testCtx(t), adminAliceKey), c, &a2a.SendMessageRequest{Message: userMessage(text)})
	upTask, _ := executionOf(srv, text)
	if upTask == "" {
		t.Fatalf("the agent ran no turn for %q", text)
	}
	return task, upTask
}

// TestAdminCancelOfInterruptedTask: an admin (who may cancel everyone's
// tasks) cancels alice's input-required task. The pipeline's task ends
// canceled and, as for alice's own cancel (TestCancelInterrupted), the
// agent receives CancelTask for its task: the cancel turn's envelope names
// alice as the conversation's owner (e2a.Envelope.Owner), the key the
// bridge keeps the task's upstream ids under.
func TestAdminCancelOfInterruptedTask(t *testing.T) {
	t.Parallel()
	srv, c := adminPipeline(t)

	task, upTask := askAsAlice(t, c, srv, "ask: admin cancel")
	got, err := c.CancelTask(up.WithAPIKey(testCtx(t), adminOpsKey), &a2a.CancelTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("the admin's CancelTask: %+v, %v", got, err)
	}
	testkit.Eventually(t, 5*time.Second, "CancelTask of the agent's task "+upTask, func() bool {
		return slices.Contains(srv.Cancels(), a2a.TaskID(upTask))
	})
}

// TestAdminAnswerOfInterruptedTask: an admin answers alice's
// input-required task (an admin may continue everyone's tasks). The
// answer is the task's next turn and reaches the agent's task that asked
// (the same upstream task, continued), as alice's own answer does.
func TestAdminAnswerOfInterruptedTask(t *testing.T) {
	t.Parallel()
	srv, c := adminPipeline(t)

	task, upTask := askAsAlice(t, c, srv, "ask: admin answer")
	answer := userMessage("Grace")
	answer.TaskID, answer.ContextID = task.ID, task.ContextID
	res, err := c.SendMessage(up.WithAPIKey(testCtx(t), adminOpsKey), &a2a.SendMessageRequest{Message: answer})
	if err != nil {
		t.Fatalf("the admin's answer: %v", err)
	}
	gotTask, continued := executionOf(srv, "Grace")
	if gotTask != upTask || !continued {
		t.Errorf("the admin's answer reached agent task %q (continued %v), want %q continued; the answer: %T %+v",
			gotTask, continued, upTask, res, res)
	}
}

// TestAdminNewTaskInOwnersContext: an admin's new message in alice's
// context (no task named) is a new task of alice's conversation: the agent
// gets it in the upstream context of alice's task, as alice's own new
// task in her context would.
func TestAdminNewTaskInOwnersContext(t *testing.T) {
	t.Parallel()
	srv, c := adminPipeline(t)

	task, _ := askAsAlice(t, c, srv, "ask: admin context")
	aliceCtx := ""
	for _, e := range srv.Executions() {
		if e.Message != nil && up.TextOf(e.Message.Parts) == "ask: admin context" {
			aliceCtx = e.ContextID
		}
	}
	msg := userMessage("ask: the admin's own task")
	msg.ContextID = task.ContextID
	res, err := c.SendMessage(up.WithAPIKey(testCtx(t), adminOpsKey), &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		t.Fatalf("the admin's message: %v", err)
	}
	for _, e := range srv.Executions() {
		if e.Message != nil && up.TextOf(e.Message.Parts) == "ask: the admin's own task" {
			if aliceCtx == "" || e.ContextID != aliceCtx || e.Continued {
				t.Fatalf("the admin's new task reached the agent in context %q (continued %v), want alice's %q as a new task; the answer: %T %+v",
					e.ContextID, e.Continued, aliceCtx, res, res)
			}
			return
		}
	}
	t.Fatalf("the agent ran no turn for the admin's message; the answer: %T %+v", res, res)
}

// TestAdminAnswerOfOwnTaskInOwnersContext: a task an admin started in
// alice's context is of alice's conversation (TestAdminNewTaskInOwnersContext),
// its next turns too: the admin's answer to its question reaches the
// agent's task that asked.
func TestAdminAnswerOfOwnTaskInOwnersContext(t *testing.T) {
	t.Parallel()
	srv, c := adminPipeline(t)

	aliceTask, _ := askAsAlice(t, c, srv, "ask: alice's question")
	msg := userMessage("ask: the admin's question")
	msg.ContextID = aliceTask.ContextID
	task := up.Asked(t, up.WithAPIKey(testCtx(t), adminOpsKey), c, &a2a.SendMessageRequest{Message: msg})
	upTask, _ := executionOf(srv, "ask: the admin's question")
	answer := userMessage("Ada")
	answer.TaskID, answer.ContextID = task.ID, task.ContextID
	res, err := c.SendMessage(up.WithAPIKey(testCtx(t), adminOpsKey), &a2a.SendMessageRequest{Message: answer})
	if err != nil {
		t.Fatalf("the admin's answer: %v", err)
	}
	if gotTask, continued := executionOf(srv, "Ada"); upTask == "" || gotTask != upTask || !continued {
		t.Errorf("the admin's answer reached agent task %q (continued %v), want %q continued; the answer: %T %+v",
			gotTask, continued, upTask, res, res)
	}
}
