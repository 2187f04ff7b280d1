package ingress_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2aclient03 "github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/push"
)

// v03KeyClient is the a2a-go v0.3 client of the principal of key (its
// JSON-RPC transport).
func v03KeyClient(t *testing.T, p *pipeline, key string) *a2aclient03.Client {
	t.Helper()
	ctx := context.Background()
	card, err := agentcard.NewResolver(nil).Resolve(ctx, p.url)
	if err != nil {
		t.Fatalf("resolve card: %v", err)
	}
	if !card.Capabilities.PushNotifications {
		t.Fatalf("v0.3 card capabilities %+v: no pushNotifications", card.Capabilities)
	}
	c, err := a2aclient03.NewFromCard(ctx, card, a2aclient03.WithJSONRPCTransport(&http.Client{Transport: keyTransport{key}}))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// TestPushV03: the a2a-go v0.3 client sends concurrent messages with an
// inline configuration.pushNotificationConfig: every update of each task
// arrives in order in the v0.3 shape (kind status-update, state
// completed last) with X-A2A-Notification-Token and the Bearer
// credentials; tasks/pushNotificationConfig/{set,get,list,delete} work on
// alice's task, and bob's set, get, list and delete of it are
// TaskNotFound, as for a task that does not exist.
func TestPushV03(t *testing.T) {
	p := startPushPipeline(t)
	r := pushtest.NewReceiver(t)
	alice, bob := v03KeyClient(t, p, testKey), v03KeyClient(t, p, bobKey)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 3
	tasks := make([]string, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			res, err := alice.SendMessage(ctx, &a2a03.MessageSendParams{
				Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: fmt.Sprintf("v03 push %d", i)}),
				Config: &a2a03.MessageSendConfig{PushConfig: &a2a03.PushConfig{URL: fmt.Sprintf("%s/v03/%d", r.URL, i),
					Token: fmt.Sprintf("tok-%d", i), Auth: &a2a03.PushAuthInfo{Schemes: []string{"Bearer"}, Credentials: fmt.Sprintf("cred-%d", i)}}},
			})
			if err == nil {
				if task, ok := res.(*a2a03.Task); ok {
					tasks[i] = string(task.ID)
				} else {
					err = fmt.Errorf("result %T", res)
				}
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
	}
	for i := range n {
		path := fmt.Sprintf("/v03/%d", i)
		r.Await(t, 20*time.Second, path, "completed")
		checkDeliveries(t, r.Of(path), tasks[i], fmt.Sprintf("tok-%d", i), fmt.Sprintf("Bearer cred-%d", i), "completed")
	}

	task := a2a03.TaskID(tasks[0])
	set, err := alice.SetTaskPushConfig(ctx, &a2a03.TaskPushConfig{TaskID: task, Config: a2a03.PushConfig{ID: "second", URL: r.URL + "/second", Token: "t2"}})
	if err != nil || set.Config.ID != "second" || set.TaskID != task {
		t.Fatalf("set: %+v %v", set, err)
	}
	got, err := alice.GetTaskPushConfig(ctx, &a2a03.GetTaskPushConfigParams{TaskID: task, ConfigID: "second"})
	if err != nil || got.Config.URL != r.URL+"/second" || got.Config.Token != "t2" {
		t.Fatalf("get: %+v %v", got, err)
	}
	list, err := alice.ListTaskPushConfig(ctx, &a2a03.ListTaskPushConfigParams{TaskID: task})
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if _, err := alice.SetTaskPushConfig(ctx, &a2a03.TaskPushConfig{TaskID: task, Config: a2a03.PushConfig{URL: "http://169.254.169.254/latest"}}); !errors.Is(err, a2a03.ErrInvalidParams) {
		t.Fatalf("set to the metadata address: %v", err)
	}

	// bob on alice's task, and on no task: the same answer.
	for _, id := range []a2a03.TaskID{task, "no-such-task"} {
		if _, err := bob.GetTaskPushConfig(ctx, &a2a03.GetTaskPushConfigParams{TaskID: id, ConfigID: "second"}); !errors.Is(err, a2a03.ErrTaskNotFound) {
			t.Fatalf("bob get %s: %v", id, err)
		}
		if _, err := bob.ListTaskPushConfig(ctx, &a2a03.ListTaskPushConfigParams{TaskID: id}); !errors.Is(err, a2a03.ErrTaskNotFound) {
			t.Fatalf("bob list %s: %v", id, err)
		}
		if _, err := bob.SetTaskPushConfig(ctx, &a2a03.TaskPushConfig{TaskID: id, Config: a2a03.PushConfig{ID: "second", URL: r.URL + "/bob"}}); !errors.Is(err, a2a03.ErrTaskNotFound) {
			t.Fatalf("bob set %s: %v", id, err)
		}
		if err := bob.DeleteTaskPushConfig(ctx, &a2a03.DeleteTaskPushConfigParams{TaskID: id, ConfigID: "second"}); !errors.Is(err, a2a03.ErrTaskNotFound) {
			t.Fatalf("bob delete %s: %v", id, err)
		}
	}
	if got, err := alice.GetTaskPushConfig(ctx, &a2a03.GetTaskPushConfigParams{TaskID: task, ConfigID: "second"}); err != nil || got.Config.URL != r.URL+"/second" {
		t.Fatalf("alice's config after bob: %+v %v", got, err)
	}
	if err := alice.DeleteTaskPushConfig(ctx, &a2a03.DeleteTaskPushConfigParams{TaskID: task, ConfigID: "second"}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := alice.GetTaskPushConfig(ctx, &a2a03.GetTaskPushConfigParams{TaskID: task, ConfigID: "second"}); !errors.Is(err, a2a03.ErrTaskNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
}

// TestPushV03SetWithoutIDIsTheTasks: A2A v0.3's
// tasks/pushNotificationConfig/get names the config optionally
// (pushNotificationConfigId); the v0.3 reference servers (@a2a-js/sdk
// 0.3, a2a-python) store a config set without id under the task's id,
// and the front door's get defaults to the task id for that reason
// (protocols/a2a/push.go). A config set without id must then be found by
// a get naming only the task.
func TestPushV03SetWithoutIDIsTheTasks(t *testing.T) {
	ctx, alice, r, task := v03PushTask(t, 30*time.Second, func(*pushtest.Receiver) *a2a03.MessageSendParams {
		return &a2a03.MessageSendParams{Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "v03 set without id"})}
	})
	set, err := alice.SetTaskPushConfig(ctx, &a2a03.TaskPushConfig{TaskID: task.ID, Config: a2a03.PushConfig{URL: r.URL + "/noid", Token: "t"}})
	if err != nil {
		t.Fatalf("set: %v", err)
	}
	got, err := alice.GetTaskPushConfig(ctx, &a2a03.GetTaskPushConfigParams{TaskID: task.ID})
	if err != nil || got.Config.URL != r.URL+"/noid" {
		t.Fatalf("get naming only the task after a set without id (set answered id %q): %+v, %v; "+
			"want the config just set (a config set without id has the task's id, as get assumes)", set.Config.ID, got, err)
	}
}

// TestPushV03GetWithoutIDOfOwnIDs: a get naming only the task, whose
// configs were all set with ids of their own (none has the task's), is
// the task's first config, as a2a-python answers it; it was -32001 "not
// found" for a task that has configs. A task without any stays -32001.
func TestPushV03GetWithoutIDOfOwnIDs(t *testing.T) {
	ctx, alice, r, task := v03PushTask(t, 30*time.Second, func(*pushtest.Receiver) *a2a03.MessageSendParams {
		return &a2a03.MessageSendParams{Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "v03 get without id"})}
	})
	if _, err := alice.GetTaskPushConfig(ctx, &a2a03.GetTaskPushConfigParams{TaskID: task.ID}); err == nil {
		t.Fatal("get naming only a task without configs: no error, want not found")
	}
	if _, err := alice.SetTaskPushConfig(ctx, &a2a03.TaskPushConfig{TaskID: task.ID, Config: a2a03.PushConfig{ID: "own", URL: r.URL + "/own"}}); err != nil {
		t.Fatalf("set: %v", err)
	}
	got, err := alice.GetTaskPushConfig(ctx, &a2a03.GetTaskPushConfigParams{TaskID: task.ID})
	if err != nil || got.Config.ID != "own" || got.Config.URL != r.URL+"/own" {
		t.Fatalf("get naming only the task, its one config set with id \"own\": %+v, %v; want that config", got, err)
	}
}

// TestPushV03InlineEachTurnIsOneConfig: a v0.3 client that sends
// its configuration.pushNotificationConfig (no id) with each message of a
// task, as v0.3 clients do, registers one webhook: the v0.3 reference
// servers save a config without id under the task's id, replacing it.
// Every update must reach the webhook once, and the task must list one
// config, not one per turn (each POSTing every later update again).
func TestPushV03InlineEachTurnIsOneConfig(t *testing.T) {
	var cfg *a2a03.MessageSendConfig
	ctx, alice, r, task := v03PushTask(t, 40*time.Second, func(r *pushtest.Receiver) *a2a03.MessageSendParams {
		cfg = &a2a03.MessageSendConfig{PushConfig: &a2a03.PushConfig{URL: r.URL + "/turns", Token: "tok"}}
		return &a2a03.MessageSendParams{Config: cfg, Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "ask:input weather"})}
	})
	if task.Status.State != a2a03.TaskStateInputRequired {
		t.Fatalf("result %+v, want an input-required task", task)
	}
	r.Await(t, 20*time.Second, "/turns", "input-required")
	answer := a2a03.NewMessageForTask(a2a03.MessageRoleUser, task, a2a03.TextPart{Text: "sunny"})
	if _, err := alice.SendMessage(ctx, &a2a03.MessageSendParams{Config: cfg, Message: answer}); err != nil {
		t.Fatalf("SendMessage 2: %v", err)
	}
	ds := r.Await(t, 20*time.Second, "/turns", "completed")
	seen := map[string]int{}
	for _, d := range ds {
		seen[d.EventID]++
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("update %s POSTed %d times to the one webhook the client registered (one config per turn); want once", id, n)
		}
	}
	list, err := alice.ListTaskPushConfig(ctx, &a2a03.ListTaskPushConfigParams{TaskID: task.ID})
	if err != nil || len(list) != 1 {
		t.Errorf("list after two turns with the same inline config: %d configs, %v; want 1 (the config without id is the task's)", len(list), err)
	}
}

// TestPushV03DeleteTwiceSucceeds: tasks/pushNotificationConfig/delete of
// a config of the caller's own task that is already gone succeeds, as
// the v0.3 reference servers (a2a-go v0.3, @a2a-js/sdk 0.3) and this
// pipeline's own v1.0 DeleteTaskPushNotificationConfig answer it
// (TestPushConfigMethods: "a second Delete is no error"): a client
// retrying a delete whose answer it lost must not get TaskNotFound for a
// task that exists.
func TestPushV03DeleteTwiceSucceeds(t *testing.T) {
	ctx, alice, r, created := v03PushTask(t, 30*time.Second, func(*pushtest.Receiver) *a2a03.MessageSendParams {
		return &a2a03.MessageSendParams{Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "v03 delete twice"})}
	})
	task := created.ID
	if _, err := alice.SetTaskPushConfig(ctx, &a2a03.TaskPushConfig{TaskID: task, Config: a2a03.PushConfig{ID: "h", URL: r.URL + "/h"}}); err != nil {
		t.Fatalf("set: %v", err)
	}
	for i := range 2 {
		if err := alice.DeleteTaskPushConfig(ctx, &a2a03.DeleteTaskPushConfigParams{TaskID: task, ConfigID: "h"}); err != nil {
			t.Fatalf("delete %d of the config of alice's own task: %v; want success (deleting a config that is gone is no error)", i+1, err)
		}
	}
}

// TestPushOpenModeClaimedUserInline: without authentication (e2a dev),
// an A2A v0.3 message whose metadata names its user (user_id, the
// interaction spec's field; the envelope's user_id, the task's owner)
// with an inline pushNotificationConfig: the config is registered for
// that task, so the webhook must get the task's updates, ending
// completed.
func TestPushOpenModeClaimedUserInline(t *testing.T) {
	ctx, pp, r, c := openModePush(t)
	msg := a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "hello from carol"})
	msg.Metadata = map[string]any{"user_id": "carol"}
	res, err := c.SendMessage(ctx, &a2a03.MessageSendParams{Message: msg,
		Config: &a2a03.MessageSendConfig{PushConfig: &a2a03.PushConfig{URL: r.URL + "/carol", Token: "tok"}}})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a03.Task)
	if !ok || task.Status.State != a2a03.TaskStateCompleted {
		t.Fatalf("result %T %+v, want a completed task", res, res)
	}
	st, err := push.NewStore(ctx, pp.NC)
	if err != nil {
		t.Fatal(err)
	}
	asCaller, _, _ := st.List(ctx, "", string(task.ID), 0, "")
	asOwner, _, _ := st.List(ctx, "carol", string(task.ID), 0, "")
	if len(r.Of("/carol")) == 0 && len(asCaller) > 0 && len(asOwner) == 0 {
		t.Fatalf("the webhook got nothing: the config is stored for the caller %q (%d configs), the task and its envelopes are carol's (%d configs)",
			"", len(asCaller), len(asOwner))
	}
	r.Await(t, 15*time.Second, "/carol", "completed")
}

// TestPushOpenModeClaimedUserMethods: without authentication, the
// push-config methods of a task whose messages claim their user in
// metadata (user_id: the envelopes' user_id, under which the push stage
// finds the task's configs) keep its configs under that user, as an
// inline config is kept: a config set by
// tasks/pushNotificationConfig/set between two turns gets the next
// turn's updates, and get and list find it.
func TestPushOpenModeClaimedUserMethods(t *testing.T) {
	ctx, _, r, c := openModePush(t)
	msg := a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "ask:input weather"})
	msg.Metadata = map[string]any{"user_id": "carol"}
	res, err := c.SendMessage(ctx, &a2a03.MessageSendParams{Message: msg})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a03.Task)
	if !ok || task.Status.State != a2a03.TaskStateInputRequired {
		t.Fatalf("result %T %+v, want an input-required task", res, res)
	}
	if _, err := c.SetTaskPushConfig(ctx, &a2a03.TaskPushConfig{TaskID: task.ID, Config: a2a03.PushConfig{ID: "h", URL: r.URL + "/set"}}); err != nil {
		t.Fatalf("set: %v", err)
	}
	if got, err := c.GetTaskPushConfig(ctx, &a2a03.GetTaskPushConfigParams{TaskID: task.ID, ConfigID: "h"}); err != nil || got.Config.URL != r.URL+"/set" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if list, err := c.ListTaskPushConfig(ctx, &a2a03.ListTaskPushConfigParams{TaskID: task.ID}); err != nil || len(list) != 1 {
		t.Fatalf("list: %d configs, %v; want 1", len(list), err)
	}
	answer := a2a03.NewMessageForTask(a2a03.MessageRoleUser, task, a2a03.TextPart{Text: "sunny"})
	answer.Metadata = map[string]any{"user_id": "carol"}
	if _, err := c.SendMessage(ctx, &a2a03.MessageSendParams{Message: answer}); err != nil {
		t.Fatalf("SendMessage 2: %v", err)
	}
	r.Await(t, 15*time.Second, "/set", "completed")
}

// v03PushTask starts a push pipeline with a webhook receiver and alice's
// v0.3 client, and sends the message params makes (given the receiver):
// its result must be a task. The context ends after timeout.
func v03PushTask(t *testing.T, timeout time.Duration, params func(r *pushtest.Receiver) *a2a03.MessageSendParams) (context.Context, *a2aclient03.Client, *pushtest.Receiver, *a2a03.Task) {
	t.Helper()
	p := startPushPipeline(t)
	r := pushtest.NewReceiver(t)
	alice := v03KeyClient(t, p, testKey)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	res, err := alice.SendMessage(ctx, params(r))
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a03.Task)
	if !ok {
		t.Fatalf("result %T, want a task", res)
	}
	return ctx, alice, r, task
}

// openModePush starts a pipeline without authentication, with push
// delivery and the demo pool, a webhook receiver and a v0.3 client; the
// context ends after 30 s.
func openModePush(t *testing.T) (context.Context, *pipetest.Pipeline, *pushtest.Receiver, *a2aclient03.Client) {
	t.Helper()
	pp := pipetest.Start(t, pipetest.WithPush("127.0.0.1"))
	pp.Pool("demo", demo.New())
	p := &pipeline{url: pp.URL, nc: pp.NC, js: pp.JS, in: pp.Ingress}
	r := pushtest.NewReceiver(t)
	c := v03KeyClient(t, p, testKey)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx, pp, r, c
}
