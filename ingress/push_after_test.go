package ingress_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/internal/pushtest"
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
