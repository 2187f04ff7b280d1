package ingress_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// grpcProtoClient is the generated A2A service client of p's gRPC binding, each
// call carrying alice's API key.
func grpcProtoClient(t *testing.T, addr string) (a2apb.A2AServiceClient, context.Context) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return a2apb.NewA2AServiceClient(conn), metadata.AppendToOutgoingContext(ctx, "x-api-key", testKey)
}

func grpcProtoMsg(id, text string) *a2apb.SendMessageRequest {
	return &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: id, Role: a2apb.Role_ROLE_USER,
		Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: text}}}}}
}

// TestGRPCPushConfigListPages: a2a.proto's
// ListTaskPushNotificationConfigsResponse.next_page_token is "a token to
// retrieve the next page of results; if this field is omitted, there are
// no subsequent pages" (A2A v1.0 §10.4.9, §5.1: each binding answers as
// the others). The pipeline pages the configs (push.Store.List; HTTP+JSON
// and JSON-RPC answer the token), but over gRPC the token is always
// empty: a client asking for pages of 2 of a task's 3 configs is told
// there is no further page and never sees the third.
func TestGRPCPushConfigListPages(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithPush("127.0.0.1"),
		pipetest.WithIngress(ingress.WithAuth(aliceAndBob(t))))
	p.Pool("demo", demo.New(), agent.WithMetrics(p.Registry))
	c, ctx := grpcProtoClient(t, p.GRPCAddr)
	res, err := c.SendMessage(ctx, grpcProtoMsg("m-pages", "configs"))
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task := res.GetTask().GetId()
	for i := range 3 {
		if _, err := c.CreateTaskPushNotificationConfig(ctx, &a2apb.TaskPushNotificationConfig{TaskId: task,
			Id: fmt.Sprintf("c%d", i), Url: "http://127.0.0.1:9/hook"}); err != nil {
			t.Fatalf("Create %d: %v", i, err)
		}
	}
	var listed []string
	token := ""
	for range 4 {
		page, err := c.ListTaskPushNotificationConfigs(ctx, &a2apb.ListTaskPushNotificationConfigsRequest{TaskId: task, PageSize: 2, PageToken: token})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		for _, cfg := range page.GetConfigs() {
			listed = append(listed, cfg.GetId())
		}
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(listed) != 3 {
		t.Errorf("gRPC ListTaskPushNotificationConfigs in pages of 2 listed %v of the task's 3 configs: the first page "+
			"has no next_page_token (HTTP+JSON and JSON-RPC answer one)", listed)
	}
}

// TestGRPCTenantOnCancelAndSubscribe: a request's tenant is its agent
// pool, and a tenant that is no valid pool name, or names another pool
// than the interface's, is InvalidParams on every call on a task
// (protocols/a2av1/pooltenant.go; a2a.proto: tenant "must match the
// tenant value from the selected AgentInterface"; A2A v1.0 §5.1: the
// bindings answer alike). JSON-RPC and HTTP+JSON refuse it on CancelTask
// and SubscribeToTask; gRPC ignores it there (GetTask refuses it).
func TestGRPCTenantOnCancelAndSubscribe(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithIngress(ingress.WithAuth(aliceAndBob(t))))
	p.Pool("demo", demo.New(), agent.WithMetrics(p.Registry))
	c, ctx := grpcProtoClient(t, p.GRPCAddr)
	res, err := c.SendMessage(ctx, grpcProtoMsg("m-tenant", "tenant"))
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	id := res.GetTask().GetId()
	const bad = "no such pool!"
	if _, err := c.GetTask(ctx, &a2apb.GetTaskRequest{Id: id, Tenant: bad}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("GetTask with tenant %q: %v; want INVALID_ARGUMENT", bad, err)
	}
	if _, err := c.CancelTask(ctx, &a2apb.CancelTaskRequest{Id: id, Tenant: bad}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("CancelTask with tenant %q: %v; want INVALID_ARGUMENT, as GetTask (and JSON-RPC's CancelTask) answers", bad, err)
	}
	s, err := c.SubscribeToTask(ctx, &a2apb.SubscribeToTaskRequest{Id: id, Tenant: bad})
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("SubscribeToTask with tenant %q: %v; want INVALID_ARGUMENT, as GetTask answers", bad, err)
	}
}

// TestGRPCBackpressureIsUnavailable: a message the pipeline could not
// publish in time (JetStream did not take it: host.ErrBackpressure) is a
// temporary failure every other door answers retryable (503 with
// Retry-After; host.AnswerSubmitError). A2A v1.0 §3.3.2 (System Errors):
// servers SHOULD answer temporary failures apart from permanent ones,
// gRPC UNAVAILABLE (or INTERNAL for a permanent one), MAY with retry
// guidance; gRPC's own retry policies retry UNAVAILABLE only. The gRPC
// binding answers it INTERNAL with no RetryInfo.
func TestGRPCBackpressureIsUnavailable(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithIngress(ingress.WithPublishTimeout(300*time.Millisecond)))
	p.Pool("demo", demo.New(), agent.WithMetrics(p.Registry))
	c, ctx := grpcProtoClient(t, p.GRPCAddr)
	if _, err := c.SendMessage(ctx, grpcProtoMsg("m-ok", "hi")); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	// JetStream stops taking requests.
	if err := p.JS.DeleteStream(ctx, "E2A_REQUESTS"); err != nil {
		t.Fatal(err)
	}
	_, err := c.SendMessage(ctx, grpcProtoMsg("m-later", "hi"))
	st, _ := status.FromError(err)
	if st.Code() != codes.Unavailable || retryDelay(st) <= 0 {
		t.Errorf("SendMessage JetStream did not take: %v %q, RetryInfo %v; want UNAVAILABLE with a RetryInfo "+
			"(a temporary failure; the other doors answer 503 with Retry-After)", st.Code(), st.Message(), retryDelay(st))
	}
}
