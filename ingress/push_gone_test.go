package ingress_test

import (
	"net/http"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestPushGoneEndsSubscription: a webhook answering 410 Gone ends its
// push config as the client's DeletePushNotificationConfig would: the
// config, set inline in SendMessage by the a2a-go/v2 client (A2A v1.0
// JSON-RPC) and by the a2a-go v0.3 client, is no longer in the task's
// ListTaskPushNotificationConfigs (tasks/pushNotificationConfig/list in
// v0.3), and its webhook got exactly one POST (the stage done with every
// frame of the task's turn). Before, it stayed listed and each update of
// the turn was posted and dead-lettered.
func TestPushGoneEndsSubscription(t *testing.T) {
	p := startPushPipeline(t)
	r := pushtest.NewReceiver(t)
	r.Answer("/gone-v1", http.StatusGone)
	r.Answer("/gone-v03", http.StatusGone)
	t.Run("v1.0", func(t *testing.T) {
		ctx := tckCtx(t)
		c := keyClient(t, p, a2a.TransportProtocolJSONRPC, testKey)
		req := userMessage("gone v1")
		req.Config = &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: r.URL + "/gone-v1", Token: "tok-v1"}}
		res, err := c.SendMessage(ctx, req)
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		task := res.(*a2a.Task).ID
		awaitGone(t, r, "/gone-v1", p, func() (int, error) {
			list, err := c.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task})
			return len(list), err
		})
	})
	t.Run("v0.3", func(t *testing.T) {
		ctx := tckCtx(t)
		c := v03KeyClient(t, p, testKey)
		res, err := c.SendMessage(ctx, &a2a03.MessageSendParams{
			Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "gone v03"}),
			Config:  &a2a03.MessageSendConfig{PushConfig: &a2a03.PushConfig{URL: r.URL + "/gone-v03", Token: "tok-v03"}},
		})
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		task := res.(*a2a03.Task).ID
		awaitGone(t, r, "/gone-v03", p, func() (int, error) {
			list, err := c.ListTaskPushConfig(ctx, &a2a03.ListTaskPushConfigParams{TaskID: task})
			return len(list), err
		})
	})
}

// awaitGone waits until the task's configs listed (n) are none and the
// push stage is done with every response frame, then checks that path
// got exactly one POST.
func awaitGone(t *testing.T, r *pushtest.Receiver, path string, p *pipeline, listed func() (int, error)) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, "the config gone from the listing, the stage idle", func() bool {
		n, err := listed()
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		return n == 0 && pushtest.StageIdle(p.js)
	})
	if got := r.Of(path); len(got) != 1 {
		t.Errorf("%s got %d POSTs, want exactly 1: %+v", path, len(got), got)
	}
}
