package ingress_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/e2a-pipeline/pipeline/ingress"
)

const bobKey = "ak_bob_0123456789abcdef00"

// aliceAndBob is API-key auth for two principals: alice (testKey) and bob
// (bobKey).
func aliceAndBob(t *testing.T) *ingress.Auth {
	t.Helper()
	a, err := ingress.NewAuth(&ingress.AuthConfig{APIKeys: []ingress.Credential{
		{Principal: "alice", Secret: testKey}, {Principal: "bob", Secret: bobKey}}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// startGRPCPipeline is startPipelineWith(opts) with the A2A v1.0 gRPC
// binding served on a loopback listener of its own (and listed in the
// card); it returns the binding's address.
func startGRPCPipeline(t *testing.T, opts ...ingress.Option) (*pipeline, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := startPipelineWith(t, append(opts, ingress.WithA2AGRPCAddress(ln.Addr().String()))...)
	gs := p.in.A2AGRPC()
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	return p, ln.Addr().String()
}

// grpcClient is the a2a-go/v2 client built from the card, preferring the
// gRPC binding, sending key (none when empty) as x-api-key metadata.
func grpcClient(t *testing.T, p *pipeline, key string, md ...string) *a2aclient.Client {
	t.Helper()
	ctx := context.Background()
	card, err := agentcard.DefaultResolver.Resolve(ctx, p.url)
	if err != nil {
		t.Fatalf("resolve card: %v", err)
	}
	withKey := func(ctx context.Context) context.Context {
		if key != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-api-key", key)
		}
		return metadata.AppendToOutgoingContext(ctx, md...)
	}
	dial := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(withKey(ctx), method, req, reply, cc, opts...)
		}),
		grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(withKey(ctx), desc, cc, method, opts...)
		}),
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2agrpc.WithGRPCTransport(dial...),
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolGRPC}}))
	if err != nil {
		t.Fatalf("client from card: %v", err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// TestA2AV1GRPC: the gRPC binding under auth (TestA2AV1Client drives its
// methods): the card lists it, reflection answers without credentials, a
// principal's task is not found by another (get, cancel, subscribe, list),
// a running task is cancelled (its pool chosen by metadata), a call without
// credentials is refused before anything is published.
func TestA2AV1GRPC(t *testing.T) {
	p, addr := startGRPCPipeline(t, ingress.WithAuth(aliceAndBob(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	card, err := agentcard.DefaultResolver.Resolve(ctx, p.url)
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, i := range card.SupportedInterfaces {
		listed = listed || (i.ProtocolBinding == a2a.TransportProtocolGRPC && i.URL == addr && i.ProtocolVersion == "1.0")
	}
	if !listed {
		t.Fatalf("the card does not list the gRPC binding at %s: %+v", addr, card.SupportedInterfaces)
	}
	// A card read as localhost names the loopback listener localhost; read
	// under another name, it keeps the listener's address.
	_, port, _ := net.SplitHostPort(addr)
	for host, want := range map[string]string{"localhost:1": "localhost:" + port, "agents.example.com": addr} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/.well-known/agent-card.json", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `"url":"`+want+`","protocolBinding":"GRPC"`) {
			t.Errorf("card read as %s: gRPC interface not at %s: %s", host, want, b)
		}
	}

	// Server reflection lists the A2A service (for grpcurl and the like).
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rs, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	lr, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var services []string
	for _, svc := range lr.GetListServicesResponse().GetService() {
		services = append(services, svc.GetName())
	}
	if !slices.Contains(services, "lf.a2a.v1.A2AService") {
		t.Fatalf("reflection lists %v", services)
	}

	alice := grpcClient(t, p, testKey)
	var last *a2a.TaskStatusUpdateEvent
	for ev, err := range alice.SendStreamingMessage(ctx, userMessage("stream grpc")) {
		if err != nil {
			t.Fatalf("SendStreamingMessage: %v", err)
		}
		last, _ = ev.(*a2a.TaskStatusUpdateEvent)
	}
	if last == nil || last.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("stream ended with %+v", last)
	}
	if list, err := alice.ListTasks(ctx, &a2a.ListTasksRequest{}); err != nil || list.TotalSize != 1 {
		t.Fatalf("alice ListTasks: %+v %v", list, err)
	}

	// Bob: alice's task does not exist for him, whatever he calls.
	bob := grpcClient(t, p, bobKey)
	if _, err := bob.GetTask(ctx, &a2a.GetTaskRequest{ID: last.TaskID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("bob GetTask of alice's task: %v", err)
	}
	if _, err := bob.CancelTask(ctx, &a2a.CancelTaskRequest{ID: last.TaskID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("bob CancelTask of alice's task: %v", err)
	}
	var subErr error
	for ev, err := range bob.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: last.TaskID}) {
		if err == nil {
			t.Fatalf("bob SubscribeToTask of alice's task got %+v", ev)
		}
		subErr = err
		break
	}
	if !errors.Is(subErr, a2a.ErrTaskNotFound) {
		t.Fatalf("bob SubscribeToTask of alice's task: %v", subErr)
	}
	if list, err := bob.ListTasks(ctx, &a2a.ListTasksRequest{}); err != nil || list.TotalSize != 0 {
		t.Fatalf("bob ListTasks: %+v %v", list, err)
	}

	// A running task (an agent that waits to be cancelled, chosen with the
	// x-e2a-agent metadata), sent with returnImmediately, is cancelled.
	started := make(chan struct{}, 1)
	runSlowAgent(t, p, started)
	slow := grpcClient(t, p, testKey, ingress.GRPCAgentMetadata, "slow")
	cancelRunning(ctx, t, slow, started)

	// Without credentials: Unauthenticated, and nothing published.
	before := streamMsgs(t, p.js, "E2A_REQUESTS")
	anon := grpcClient(t, p, "")
	if _, err := anon.SendMessage(ctx, userMessage("who am i")); !errors.Is(err, a2a.ErrUnauthenticated) {
		t.Fatalf("no credentials: %v", err)
	}
	if after := streamMsgs(t, p.js, "E2A_REQUESTS"); after != before {
		t.Fatalf("a refused call published: %d -> %d requests", before, after)
	}
}
