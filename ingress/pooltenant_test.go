package ingress_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestPoolEndpointsGRPCTenant: a pool's card lists the A2A v1.0 gRPC
// binding with `tenant: <pool>`; the a2a-go/v2 client built from that card
// on gRPC (which sends the interface's tenant in every request, A2A v1.0
// §8.3.2) reaches that pool and no other, with SendMessage and
// SendStreamingMessage, and its GetTask finds the task. A JSON-RPC request
// carrying a tenant on the pipeline's own interface goes to that pool; a
// tenant naming another pool than the interface's path, no valid pool
// name, or a pool no worker ever served (the pool check) is InvalidParams.
func TestPoolEndpointsGRPCTenant(t *testing.T) {
	t.Parallel()
	p := pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithIngress(ingress.WithPoolCheck(time.Second)))
	p.Pool("demo", whoAmI("demo"))
	p.Pool("echo", whoAmI("echo"))
	ctx := context.Background()
	grpcOpt := a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials()))
	for _, pool := range []string{"echo", "demo"} {
		card, err := agentcard.DefaultResolver.Resolve(ctx, p.URL+"/pools/"+pool)
		if err != nil {
			t.Fatal(err)
		}
		var listed *a2a.AgentInterface
		for _, i := range card.SupportedInterfaces {
			if i.ProtocolBinding == a2a.TransportProtocolGRPC {
				listed = i
			}
		}
		if listed == nil || listed.Tenant != pool || listed.URL != p.GRPCAddr {
			t.Fatalf("%s: the card's gRPC interface %+v, want %s with tenant %q", pool, listed, p.GRPCAddr, pool)
		}
		c, err := a2aclient.NewFromCard(ctx, card, grpcOpt,
			a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolGRPC}}))
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))})
		if err != nil {
			t.Fatalf("%s: gRPC SendMessage: %v", pool, err)
		}
		if got := v1AnswerText(res); got != "pool "+pool {
			t.Errorf("%s: gRPC answer %q, want the %s pool's", pool, got, pool)
		}
		if task, ok := res.(*a2a.Task); ok {
			if _, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID}); err != nil {
				t.Errorf("%s: GetTask with the tenant: %v", pool, err)
			}
		}
		var streamed string
		for ev, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))}) {
			if err != nil {
				t.Fatalf("%s: gRPC stream: %v", pool, err)
			}
			if ae, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok && ae.Artifact != nil {
				streamed += v1Text(ae.Artifact.Parts)
			}
		}
		if streamed != "pool "+pool {
			t.Errorf("%s: gRPC stream %q, want the %s pool's", pool, streamed, pool)
		}
		_ = c.Destroy()
	}

	// JSON-RPC: the request's tenant on the pipeline's own interface.
	root, err := agentcard.DefaultResolver.Resolve(ctx, p.URL)
	if err != nil {
		t.Fatal(err)
	}
	rpc := func(card *a2a.AgentCard) *a2aclient.Client {
		c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC}}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Destroy() })
		return c
	}
	send := func(c *a2aclient.Client, tenant string) (string, error) {
		res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Tenant: tenant, Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))})
		return v1AnswerText(res), err
	}
	if got, err := send(rpc(root), "echo"); err != nil || got != "pool echo" {
		t.Errorf("JSON-RPC with tenant echo: %q, %v; want the echo pool's", got, err)
	}
	echoCard, err := agentcard.DefaultResolver.Resolve(ctx, p.URL+"/pools/echo")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := send(rpc(echoCard), "demo"); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("tenant demo on the echo pool's interface: %v, want InvalidParams", err)
	}
	for _, bad := range []string{"not a pool!", "nosuchpool"} {
		if _, err := send(rpc(root), bad); !errors.Is(err, a2a.ErrInvalidParams) {
			t.Errorf("tenant %q: %v, want InvalidParams", bad, err)
		}
	}
}

// TestA2AV1TenantOnReads: the request's tenant is its agent pool on
// every binding, and an invalid pool name is InvalidParams
// (protocols/a2av1/pooltenant.go; SendMessage answers so) on the calls on
// a task too (GetTask, ListTasks, CancelTask). A valid tenant does not
// scope the calls naming a task: the task is the caller's whichever pool
// ran it (ListTasks lists the tenant's pool's: TestListTasksOfPool).
func TestA2AV1TenantOnReads(t *testing.T) {
	p := startPipeline(t)
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.SendMessage(ctx, userMessage("tenant"))
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	send := userMessage("bad tenant")
	send.Tenant = "no such pool!"
	if _, err := c.SendMessage(ctx, send); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Fatalf("SendMessage with tenant %q: %v", send.Tenant, err)
	}
	if _, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: id, Tenant: "no such pool!"}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("GetTask with tenant %q: %v; want InvalidParams, as SendMessage answers", "no such pool!", err)
	}
	if _, err := c.ListTasks(ctx, &a2a.ListTasksRequest{Tenant: "no such pool!"}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("ListTasks with tenant %q: %v; want InvalidParams, as SendMessage answers", "no such pool!", err)
	}
	if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id, Tenant: "no such pool!"}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("CancelTask with tenant %q: %v; want InvalidParams, as SendMessage answers", "no such pool!", err)
	}
	if got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: id, Tenant: "elsewhere"}); err != nil || got.ID != id {
		t.Errorf("GetTask with the valid tenant of another pool: %v; want the caller's task", err)
	}
}
