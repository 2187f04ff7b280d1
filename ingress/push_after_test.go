package ingress_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// oneRequest checks that every delivery belongs to one request (the
// event ids' first part), the one that completed (checkDeliveries), and
// none is the first turn's input-required: no update of the earlier turn
// was delivered.
func oneRequest(t *testing.T, ds []pushtest.Delivery) {
	t.Helper()
	rid := strings.Split(ds[0].EventID, ":")[0]
	for i, d := range ds {
		if !strings.HasPrefix(d.EventID, rid+":") || strings.Contains(strings.ToLower(d.State), "input") {
			t.Fatalf("delivery %d %q (%s): not of the answer's request %s (an update stored before the config)", i, d.EventID, d.State, rid)
		}
	}
}

// TestPushAfterRegistration: a config made with
// CreateTaskPushNotificationConfig for a task already running (left
// input-required by its first turn, "ask:input") gets the updates that
// follow it, over each binding with the a2a-go/v2 client: every update of
// the answer's turn, in order, with the config's token and Bearer
// credentials, ending with the completed status, and none of the first
// turn (stored before the config: A2A v1.0 §3.1.7 makes the config a
// webhook for the task's update notifications from its creation; the
// state before is GetTask's).
func TestPushAfterRegistration(t *testing.T) {
	p := startPushPipeline(t)
	r := pushtest.NewReceiver(t)
	for _, binding := range pushBindings {
		t.Run(string(binding), func(t *testing.T) {
			c := keyClient(t, p, binding, testKey)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := c.SendMessage(ctx, userMessage("ask:input the weather"))
			if err != nil {
				t.Fatalf("SendMessage: %v", err)
			}
			task, ok := res.(*a2a.Task)
			if !ok || task.Status.State != a2a.TaskStateInputRequired {
				t.Fatalf("first turn: %T %+v, want an input-required task", res, res)
			}
			path := "/after/" + string(binding)
			_, err = c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "after", URL: r.URL + path,
				Token: "tok-after", Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "cred-after"}})
			if err != nil {
				t.Fatalf("CreateTaskPushConfig: %v", err)
			}
			answer := userMessage("Paris")
			answer.Message.TaskID, answer.Message.ContextID = task.ID, task.ContextID
			res, err = c.SendMessage(ctx, answer)
			if err != nil {
				t.Fatalf("the answer: %v", err)
			}
			if done, ok := res.(*a2a.Task); !ok || done.Status.State != a2a.TaskStateCompleted {
				t.Fatalf("the answer's result %T %+v", res, res)
			}
			ds := r.Await(t, 20*time.Second, path, "TASK_STATE_COMPLETED")
			checkDeliveries(t, ds, string(task.ID), "tok-after", "Bearer cred-after", "TASK_STATE_COMPLETED")
			oneRequest(t, ds)
		})
	}
}

// TestPushV03AfterRegistration: the same with the a2a-go v0.3 client and
// tasks/pushNotificationConfig/set; each POST is the whole Task, as the
// v0.3 SDKs' senders post it (X-A2A-Notification-Token, the Bearer
// credentials), the answer's turn only, its last the completed task equal
// to what tasks/get answers.
func TestPushV03AfterRegistration(t *testing.T) {
	p := startPushPipeline(t)
	r := pushtest.NewReceiver(t)
	c := v03KeyClient(t, p, testKey)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.SendMessage(ctx, &a2a03.MessageSendParams{Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "ask:input the weather"})})
	if err != nil {
		t.Fatalf("message/send: %v", err)
	}
	task, ok := res.(*a2a03.Task)
	if !ok || task.Status.State != a2a03.TaskStateInputRequired {
		t.Fatalf("first turn: %T %+v, want an input-required task", res, res)
	}
	_, err = c.SetTaskPushConfig(ctx, &a2a03.TaskPushConfig{TaskID: task.ID, Config: a2a03.PushConfig{ID: "after",
		URL: r.URL + "/v03after", Token: "tok-v03", Auth: &a2a03.PushAuthInfo{Schemes: []string{"Bearer"}, Credentials: "cred-v03"}}})
	if err != nil {
		t.Fatalf("set: %v", err)
	}
	answer := a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "Paris"})
	answer.TaskID, answer.ContextID = task.ID, task.ContextID
	if _, err := c.SendMessage(ctx, &a2a03.MessageSendParams{Message: answer}); err != nil {
		t.Fatalf("the answer: %v", err)
	}
	ds := r.Await(t, 20*time.Second, "/v03after", "completed")
	checkDeliveries(t, ds, string(task.ID), "tok-v03", "Bearer cred-v03", "completed")
	oneRequest(t, ds)
	for i, d := range ds {
		if d.Kind != "task" {
			t.Fatalf("delivery %d is a %s, want the Task: %s", i, d.Kind, d.Body)
		}
	}
	var last a2a03.Task
	if err := json.Unmarshal(ds[len(ds)-1].Body, &last); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetTask(ctx, &a2a03.TaskQueryParams{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	lastJSON, _ := json.Marshal(&last)
	getJSON, _ := json.Marshal(got)
	if string(lastJSON) != string(getJSON) {
		t.Fatalf("last delivery\n%s\ntasks/get\n%s", lastJSON, getJSON)
	}
	if n := len(last.History); n < 3 {
		t.Fatalf("the delivered task holds %d history messages, want both turns'", n)
	}
}

// TestPushV1ContinuationEndedByAgentReply: a task with a v1.0
// webhook (an inline config) asks a question; the answer's turn, ended by
// agent.Reply, completes the task (GetTask, the blocking SendMessage's
// Task, and since 4075c8b its streams: the Task then the final
// status-update, completed, carrying the reply). The webhook is the
// task's update channel too: it must get that completed status-update,
// once, after the input-required one (docs/push.md: a v1.0 body is a
// statusUpdate or an artifactUpdate), never a bare {"message":…} that
// leaves the webhook without the task's end.
func TestPushV1ContinuationEndedByAgentReply(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithPush("127.0.0.1"), pipetest.WithIngress(ingress.WithDefaultPool("asker")))
	p.Pool("asker", replier)
	r := pushtest.NewReceiver(t)
	c := up.Client(t, p.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const path = "/hook"
	q := up.Msg("the weather")
	q.Config = &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: r.URL + path, Token: "tok"}}
	task := up.Asked(t, ctx, c, q)
	r.Await(t, 20*time.Second, path, string(a2a.TaskStateInputRequired))
	asked := len(r.Of(path)) // the question's turn ended with that delivery
	res, err := c.SendMessage(ctx, up.Reply(task, "Paris"))
	if err != nil {
		t.Fatal(err)
	}
	if done, ok := res.(*a2a.Task); !ok || done.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("the answer's result %T %+v; want the Task completed", res, res)
	}
	// The answer's turn ends with its last delivery: a terminal status,
	// or a bare Message (nothing of the turn follows either: deliveries
	// keep the task's order).
	testkit.Eventually(t, 20*time.Second, "the answer's turn's last delivery", func() bool {
		for _, d := range r.Of(path)[asked:] {
			if d.Kind == "message" || d.Kind == "status" && d.State != string(a2a.TaskStateWorking) && d.State != string(a2a.TaskStateSubmitted) {
				return true
			}
		}
		return false
	})
	ds := r.Of(path)
	completed := 0
	for _, d := range ds {
		if d.Kind == "status" && d.State == string(a2a.TaskStateCompleted) {
			completed++
		}
	}
	last := ds[len(ds)-1]
	if completed != 1 || last.Kind != "status" || last.State != string(a2a.TaskStateCompleted) || last.TaskID != string(task.ID) {
		var got []string
		for _, d := range ds {
			got = append(got, d.Kind+" "+d.State+" "+string(d.Body))
		}
		t.Fatalf("webhook deliveries of task %s:\n%s\nwant the completed status-update (with the agent's reply) once, last",
			task.ID, strings.Join(got, "\n"))
	}
}
