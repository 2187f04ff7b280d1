package ingress_test

import (
	"context"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestPushRefusalSpeaksToTheClient: a push config refused as invalid
// params (a webhook URL the rules refuse, a field out of bounds) is
// answered in the client's words at every door (A2A v1.0 JSON-RPC,
// HTTP+JSON and gRPC, v0.3), without the Go error's "push: " prefix
// (design.md Guarantees 7). They said "invalid params: push: webhook URL
// refused: …" and "push: invalid push notification config: …".
func TestPushRefusalSpeaksToTheClient(t *testing.T) {
	p := startPushPipeline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check := func(door string, err error, want string) {
		t.Helper()
		if err == nil || strings.Contains(err.Error(), "push: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want a refusal saying %q, without the package's \"push: \"", door, err, want)
		}
	}
	for _, binding := range pushBindings {
		alice := keyClient(t, p, binding, testKey)
		res, err := alice.SendMessage(ctx, userMessage("refused config"))
		if err != nil {
			t.Fatalf("%s SendMessage: %v", binding, err)
		}
		task := res.(*a2a.Task).ID
		_, err = alice.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task, URL: "http://10.0.0.1/hook"})
		check(string(binding)+" URL", err, "webhook URL refused")
		_, err = alice.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task, URL: "https://10.0.0.1/hook", Token: " padded"})
		check(string(binding)+" token", err, "invalid push notification config")
	}
	alice := v03KeyClient(t, p, testKey)
	res, err := alice.SendMessage(ctx, &a2a03.MessageSendParams{Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "v03 refused config"})})
	if err != nil {
		t.Fatalf("v0.3 SendMessage: %v", err)
	}
	task := res.(*a2a03.Task).ID
	_, err = alice.SetTaskPushConfig(ctx, &a2a03.TaskPushConfig{TaskID: task, Config: a2a03.PushConfig{URL: "http://10.0.0.1/hook"}})
	check("v0.3 URL", err, "webhook URL refused")
}
