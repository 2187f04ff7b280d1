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

	"github.com/e2a-pipeline/pipeline/internal/pushtest"
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
