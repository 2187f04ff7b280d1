package ingress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

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

// TestGRPCStreamUndecodable: on the pipeline's gRPC server (A2AGRPC), a
// streaming method's request message that is not its protobuf (here a
// tenant, field 1, of invalid UTF-8) is INVALID_ARGUMENT with the
// ErrorInfo of a parse error, as SendMessage answers it (A2A v1.0 §3.3.2:
// a validation error). It was gRPC's own INTERNAL ("failed to unmarshal
// the received message"), a server's failure to clients and retry
// policies: the server lacked the binding's codec.
func TestGRPCStreamUndecodable(t *testing.T) {
	_, addr := startGRPCPipeline(t, ingress.WithAuth(aliceAndBob(t)))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-api-key", testKey), 30*time.Second)
	defer cancel()
	bad := wrapperspb.Bytes([]byte{0xff})
	answer := func(st *status.Status) string {
		for _, d := range st.Details() {
			if i, ok := d.(*errdetails.ErrorInfo); ok && i.GetDomain() == a2a.ProtocolDomain {
				return st.Code().String() + " " + i.GetReason()
			}
		}
		return st.Code().String() + " without an A2A ErrorInfo"
	}
	if got := answer(status.Convert(conn.Invoke(ctx, a2apb.A2AService_SendMessage_FullMethodName, bad, &a2apb.SendMessageResponse{}))); got != "InvalidArgument PARSE_ERROR" {
		t.Fatalf("SendMessage of an undecodable request: %s; want InvalidArgument PARSE_ERROR", got)
	}
	for _, m := range []string{a2apb.A2AService_SendStreamingMessage_FullMethodName, a2apb.A2AService_SubscribeToTask_FullMethodName} {
		s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, m)
		if err == nil {
			err = s.SendMsg(bad)
		}
		if err == nil {
			err = s.CloseSend()
		}
		for err == nil {
			err = s.RecvMsg(&a2apb.StreamResponse{})
		}
		if errors.Is(err, io.EOF) {
			t.Errorf("%s of an undecodable request: a stream; want InvalidArgument PARSE_ERROR", m)
		} else if got := answer(status.Convert(err)); got != "InvalidArgument PARSE_ERROR" {
			t.Errorf("%s of an undecodable request: %s (%v); want InvalidArgument PARSE_ERROR, as SendMessage answers it", m, got, err)
		}
	}
}
