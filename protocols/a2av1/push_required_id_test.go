package a2av1

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/push"
)

// pushFakeHost is a fakeHost keeping push configs in a real store.
type pushFakeHost struct {
	fakeHost
	st *push.Store
}

var _ PushHost = pushFakeHost{}

func (p pushFakeHost) PushStore() *push.Store { return p.st }

// TestPushConfigIDRequired: GetTaskPushNotificationConfigRequest's and
// DeleteTaskPushNotificationConfigRequest's id is REQUIRED (a2a.proto,
// field_behavior). A get or delete without it is InvalidParams, as one
// without taskId is: a delete answered success for it told the client
// its config was gone while every update was still posted to its
// webhook, and a get answered TaskNotFound for a task the caller has.
func TestPushConfigIDRequired(t *testing.T) {
	_, nc := natstest.RunServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := push.NewStore(ctx, nc, push.WithAllowHosts("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	fh := pushFakeHost{fakeHost: newFakeHost(), st: st}
	fh.AddTask(key, task("mine", "c1", normalizer.ProtocolA2A, ""))
	h := &handler{h: fh}
	_, cctx := newHandler(fh.fakeHost)
	if _, err := h.CreateTaskPushConfig(cctx, &a2a.PushConfig{TaskID: "mine", ID: "c1", URL: "http://127.0.0.1:1/hook"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.GetTaskPushConfig(cctx, &a2a.GetTaskPushConfigRequest{TaskID: "mine"}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("get without id: %v, want InvalidParams", err)
	}
	if err := h.DeleteTaskPushConfig(cctx, &a2a.DeleteTaskPushConfigRequest{TaskID: "mine"}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("delete without id: %v, want InvalidParams", err)
	}
	// An unknown id is still deleted idempotently (A2A v1.0 §3.1.10), and
	// the task's config is intact.
	if err := h.DeleteTaskPushConfig(cctx, &a2a.DeleteTaskPushConfigRequest{TaskID: "mine", ID: "gone"}); err != nil {
		t.Errorf("delete of an unknown id: %v, want success", err)
	}
	if got, err := h.GetTaskPushConfig(cctx, &a2a.GetTaskPushConfigRequest{TaskID: "mine", ID: "c1"}); err != nil || got.URL != "http://127.0.0.1:1/hook" {
		t.Errorf("config after the deletes: %+v %v", got, err)
	}
}
