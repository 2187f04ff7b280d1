package a2av1_test

import (
	"context"
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
)

// TestPushConfigTenant: the push-config methods check the request's
// tenant as every other method does (pooltenant.go): a2a-go/v2's client
// of a JSON-RPC interface sends its tenant in every request, and one
// naming another pool than the interface's, or no valid pool name, is
// InvalidParams. The four methods ignored it: a config was created,
// read, listed and deleted through an interface the tenant does not
// name, where GetTask of the same task was refused.
func TestPushConfigTenant(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithPush("x.example"), pipetest.WithIngress(ingress.WithDefaultPool("demo")))
	p.Pool("demo", poolNamed("demo"))
	p.Pool("echo", poolNamed("echo"))
	ctx := context.Background()
	echoURL := p.URL + ingress.PoolsPath + "echo" + a2av1.Path
	req := hi()
	req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	res, err := rpcClient(t, echoURL, "").SendMessage(ctx, req)
	task, ok := res.(*a2a.Task)
	if err != nil || !ok {
		t.Fatalf("SendMessage: %v, %v; want a task", res, err)
	}
	if _, err := rpcClient(t, echoURL, "").CreateTaskPushConfig(ctx,
		&a2a.PushConfig{TaskID: task.ID, ID: "c1", URL: "https://x.example/hook"}); err != nil {
		t.Fatalf("CreateTaskPushConfig without a tenant: %v", err)
	}
	for _, tenant := range []string{"demo", "not a pool!"} {
		c := rpcClient(t, echoURL, tenant)
		if _, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID}); !errors.Is(err, a2a.ErrInvalidParams) {
			t.Fatalf("tenant %q: GetTask: %v, want InvalidParams", tenant, err)
		}
		_, err := c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "c2", URL: "https://x.example/hook"})
		check(t, tenant, "CreateTaskPushConfig", err)
		_, err = c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "c1"})
		check(t, tenant, "GetTaskPushConfig", err)
		_, err = c.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
		check(t, tenant, "ListTaskPushConfigs", err)
		check(t, tenant, "DeleteTaskPushConfig", c.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "c1"}))
	}
	l, err := rpcClient(t, echoURL, "echo").ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
	if err != nil || len(l) != 1 || l[0].ID != "c1" {
		t.Errorf("the task's configs with the interface's own tenant: %+v, %v; want c1 alone", l, err)
	}
}

func check(t *testing.T, tenant, method string, err error) {
	t.Helper()
	if !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("tenant %q: %s: %v, want InvalidParams", tenant, method, err)
	}
}

// rpcClient is a2a-go/v2's client of the JSON-RPC interface at url with
// tenant, which it sends in every request.
func rpcClient(t *testing.T, url, tenant string) *a2aclient.Client {
	t.Helper()
	return tenantClient(t, url, tenant, a2a.TransportProtocolJSONRPC)
}
