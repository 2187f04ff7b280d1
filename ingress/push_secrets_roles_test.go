package ingress_test

import (
	"context"
	"strings"
	"testing"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/internal/pushtest"
)

// aliceTaskAudited starts a pipeline with push configs and the keys of
// alice and of ops, an auditor, and returns alice's client, a task of
// hers (one message sent) and a push receiver.
func aliceTaskAudited(t *testing.T, aliceKey, opsKey string) (*pipeline, context.Context, *a2aclient.Client, *a2a.Task, *pushtest.Receiver) {
	t.Helper()
	p, ctx := keyedPush(t, map[string]string{"alice": aliceKey, "ops": opsKey}, map[string][]string{"ops": {"audit"}})
	alice := keyClient(t, p, a2a.TransportProtocolJSONRPC, aliceKey)
	res, err := alice.SendMessage(ctx, userMessage("hello"))
	if err != nil {
		t.Fatalf("alice SendMessage: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("alice SendMessage: %T", res)
	}
	return p, ctx, alice, task, pushtest.NewReceiver(t)
}

// TestAuditReadsPushConfigsWithoutSecrets: a push config's token and
// credentials are sent to the webhook only (docs/push.md). A principal
// with the audit role reads alice's task, and its
// GetTaskPushNotificationConfig / ListTaskPushNotificationConfigs on it
// were answered with alice's webhook token and Authorization credentials,
// with which it could forge pushes to her receiver. It reads the configs
// with those hidden now; alice still reads them whole.
func TestAuditReadsPushConfigsWithoutSecrets(t *testing.T) {
	const aliceKey, opsKey = "ak_pushsec_alice_0123456", "ak_pushsec_ops_00123456"
	const tok, cred = "tok-alice-SECRET-7f3c", "cred-alice-SECRET-9e8d"
	p, ctx, alice, task, r := aliceTaskAudited(t, aliceKey, opsKey)
	ops := keyClient(t, p, a2a.TransportProtocolJSONRPC, opsKey)
	if _, err := alice.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "c1", URL: r.URL + "/alice", Token: tok,
		Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: cred}}); err != nil {
		t.Fatalf("alice CreateTaskPushConfig: %v", err)
	}
	got, err := ops.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "c1"})
	if err != nil || got.ID != "c1" {
		t.Fatalf("the audit principal's GetTaskPushConfig: %+v %v", got, err)
	}
	if got.Token != "" || got.Auth == nil || got.Auth.Credentials != "" || got.Auth.Scheme != "Bearer" || strings.Contains(got.URL, "/alice") {
		t.Errorf("the audit principal read alice's push config with her webhook secrets: token %q auth %+v url %q", got.Token, got.Auth, got.URL)
	}
	list, err := ops.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
	if err != nil || len(list) != 1 {
		t.Fatalf("the audit principal's ListTaskPushConfigs: %+v %v", list, err)
	}
	if c := list[0]; c.Token != "" || c.Auth == nil || c.Auth.Credentials != "" {
		t.Errorf("the audit principal listed alice's push config with her webhook secrets: token %q auth %+v", c.Token, c.Auth)
	}
	own, err := alice.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "c1"})
	if err != nil || own.Token != tok || own.Auth == nil || own.Auth.Credentials != cred || own.URL != r.URL+"/alice" {
		t.Errorf("alice's own read of her config: %+v %v", own, err)
	}
}

// TestAuditReadsPushConfigsWithoutSecretsV03: the same on A2A
// v0.3's tasks/pushNotificationConfig/get and /list at /a2a.
func TestAuditReadsPushConfigsWithoutSecretsV03(t *testing.T) {
	const aliceKey, opsKey = "ak_pushsec3_alice_012345", "ak_pushsec3_ops_0012345"
	const tok, cred = "tok-alice-SECRET-03aa", "cred-alice-SECRET-03bb"
	p, ctx, _, task, r := aliceTaskAudited(t, aliceKey, opsKey)
	alice03, ops03 := v03KeyClient(t, p, aliceKey), v03KeyClient(t, p, opsKey)
	if _, err := alice03.SetTaskPushConfig(ctx, &a2a03.TaskPushConfig{TaskID: a2a03.TaskID(task.ID),
		Config: a2a03.PushConfig{ID: "c1", URL: r.URL + "/alice", Token: tok,
			Auth: &a2a03.PushAuthInfo{Schemes: []string{"Bearer"}, Credentials: cred}}}); err != nil {
		t.Fatalf("alice tasks/pushNotificationConfig/set: %v", err)
	}
	got, err := ops03.GetTaskPushConfig(ctx, &a2a03.GetTaskPushConfigParams{TaskID: a2a03.TaskID(task.ID), ConfigID: "c1"})
	if err != nil {
		t.Fatalf("the audit principal's tasks/pushNotificationConfig/get: %v", err)
	}
	if got.Config.Token != "" || got.Config.Auth == nil || got.Config.Auth.Credentials != "" || strings.Contains(got.Config.URL, "/alice") {
		t.Errorf("the audit principal read alice's v0.3 push config with her webhook secrets: %+v", got.Config)
	}
	list, err := ops03.ListTaskPushConfig(ctx, &a2a03.ListTaskPushConfigParams{TaskID: a2a03.TaskID(task.ID)})
	if err != nil || len(list) != 1 {
		t.Fatalf("the audit principal's tasks/pushNotificationConfig/list: %+v %v", list, err)
	}
	if c := list[0].Config; c.Token != "" || c.Auth == nil || c.Auth.Credentials != "" {
		t.Errorf("the audit principal listed alice's v0.3 push config with her webhook secrets: %+v", c)
	}
	own, err := alice03.GetTaskPushConfig(ctx, &a2a03.GetTaskPushConfigParams{TaskID: a2a03.TaskID(task.ID), ConfigID: "c1"})
	if err != nil || own.Config.Token != tok || own.Config.Auth == nil || own.Config.Auth.Credentials != cred {
		t.Errorf("alice's own v0.3 read of her config: %+v %v", own, err)
	}
}
