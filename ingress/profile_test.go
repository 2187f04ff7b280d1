package ingress_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/streams"
)

const (
	basicPool = "basic"
	basicExt  = "urn:example:required"
)

// startBasicPipeline is a pipeline whose default pool, basicPool, served
// by the demo agent, publishes the info of a pool that does not stream
// and requires basicExt; it returns the gRPC binding's address.
func startBasicPipeline(t *testing.T) (*pipeline, string) {
	t.Helper()
	p, addr := startGRPCPipeline(t, ingress.WithDefaultPool(basicPool))
	ctx, cancel := context.WithCancel(context.Background())
	conv, err := bridge.OpenConversations(ctx, p.js, streams.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := conv.PublishPool(ctx, bridge.PoolInfo{Pool: basicPool, Streaming: false, RequiredExtensions: []string{basicExt}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = agent.Run(ctx, p.nc, basicPool, demo.New()) }()
	t.Cleanup(func() { cancel(); <-done })
	return p, addr
}

// requestsStored is the number of requests published on E2A_REQUESTS.
func requestsStored(t *testing.T, p *pipeline) uint64 {
	t.Helper()
	st, err := p.js.Stream(context.Background(), streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// TestPoolProfile: a pool whose info says it does not stream and requires
// an extension: its card and the root card (it is the default pool) say
// streaming false and list the extension as required; on JSON-RPC,
// HTTP+JSON and gRPC, with the a2a-go/v2 client, a message without the
// extension is ExtensionSupportRequiredError and one with it is answered
// (SendStreamingMessage falls back to SendMessage, as the card says);
// SendStreamingMessage and SubscribeToTask are UnsupportedOperationError
// (gRPC UNIMPLEMENTED; JSON-RPC and HTTP+JSON a plain JSON answer, no
// stream); nothing refused was published.
func TestPoolProfile(t *testing.T) {
	p, _ := startBasicPipeline(t)
	ctx := tckCtx(t)
	for _, path := range []string{ingress.A2AV1Path, "/pools/" + basicPool + ingress.A2AV1Path} {
		card, err := agentcard.DefaultResolver.Resolve(ctx, p.url+path)
		if err != nil {
			t.Fatal(err)
		}
		if card.Capabilities.Streaming || !slices.ContainsFunc(card.Capabilities.Extensions, func(e a2a.AgentExtension) bool {
			return e.URI == basicExt && e.Required
		}) {
			t.Fatalf("card at %s: %+v", path, card.Capabilities)
		}
	}
	withExt := a2aclient.AttachServiceParams(ctx, a2aclient.ServiceParams{a2a.SvcParamExtensions: {basicExt}})
	for _, binding := range v1Bindings {
		t.Run(string(binding), func(t *testing.T) {
			card, c := v1Client(t, p, binding)
			before := requestsStored(t, p)
			if _, err := c.SendMessage(ctx, userMessage("no extension")); !errors.Is(err, a2a.ErrExtensionSupportRequired) {
				t.Fatalf("SendMessage without the extension: %v", err)
			}
			if n := requestsStored(t, p); n != before {
				t.Fatalf("a refused message was published (%d requests, %d before)", n, before)
			}
			res, err := c.SendMessage(withExt, userMessage("with the extension"))
			task, ok := res.(*a2a.Task)
			if err != nil || !ok || task.Status.State != a2a.TaskStateCompleted {
				t.Fatalf("SendMessage with the extension: %+v, %v", res, err)
			}
			var last a2a.Event
			for ev, err := range c.SendStreamingMessage(withExt, userMessage("streamed, as the card allows")) {
				if err != nil {
					t.Fatalf("SendStreamingMessage from the card: %v", err)
				}
				last = ev
			}
			if tk, ok := last.(*a2a.Task); !ok || tk.Status.State != a2a.TaskStateCompleted {
				t.Fatalf("SendStreamingMessage from the card: %+v", last)
			}
			if binding == a2a.TransportProtocolGRPC {
				return // the status codes: TestPoolProfileGRPC
			}
			streaming := *card
			streaming.Capabilities.Streaming = true // the client streams only then
			sc := clientAt(t, &streaming, binding, bindingURL(t, card, binding))
			before = requestsStored(t, p)
			for _, err := range sc.SendStreamingMessage(withExt, userMessage("stream")) {
				if !errors.Is(err, a2a.ErrUnsupportedOperation) {
					t.Fatalf("SendStreamingMessage: %v", err)
				}
			}
			for _, err := range sc.SubscribeToTask(withExt, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
				if !errors.Is(err, a2a.ErrUnsupportedOperation) {
					t.Fatalf("SubscribeToTask: %v", err)
				}
			}
			if n := requestsStored(t, p); n != before {
				t.Fatalf("a refused stream was published (%d requests, %d before)", n, before)
			}
		})
	}
	// A plain JSON answer, not a stream (the TCK reads it with .json()).
	for path, body := range map[string]string{
		ingress.A2AV1Path:                     `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"role":"ROLE_USER","messageId":"m","parts":[{"text":"x"}]}}}`,
		ingress.A2AV1Path + "/message:stream": `{"message":{"role":"ROLE_USER","messageId":"m","parts":[{"text":"x"}]}}`,
	} {
		resp, b := do(t, "POST", p.url+path, body, "Content-Type", "application/json")
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") || !strings.Contains(string(b), "UNSUPPORTED_OPERATION") ||
			(path != ingress.A2AV1Path && resp.StatusCode != http.StatusBadRequest) {
			t.Errorf("%s: %d %s %s", path, resp.StatusCode, ct, b)
		}
	}
}

// TestPoolProfileGRPC: on the gRPC binding, SendStreamingMessage and
// SubscribeToTask to the pool that does not stream are UNIMPLEMENTED
// (A2A v1.0 §5.4: UnsupportedOperationError for a capability the card does
// not declare), a message without the required extension
// FAILED_PRECONDITION EXTENSION_SUPPORT_REQUIRED.
func TestPoolProfileGRPC(t *testing.T) {
	_, addr := startBasicPipeline(t)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := a2apb.NewA2AServiceClient(conn)
	ctx := tckCtx(t)
	msg := &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "m1", Role: a2apb.Role_ROLE_USER,
		Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hello"}}}}}
	_, err = c.SendMessage(ctx, msg)
	if code, reason := grpcStatus(err); code != codes.FailedPrecondition || reason != "EXTENSION_SUPPORT_REQUIRED" {
		t.Errorf("SendMessage without the extension: %s %s (%v)", code, reason, err)
	}
	withExt := metadata.AppendToOutgoingContext(ctx, "a2a-extensions", basicExt)
	res, err := c.SendMessage(withExt, msg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.SendStreamingMessage(withExt, msg)
	if err == nil {
		_, err = st.Recv()
	}
	if code, reason := grpcStatus(err); code != codes.Unimplemented || reason != "UNSUPPORTED_OPERATION" {
		t.Errorf("SendStreamingMessage: %s %s (%v)", code, reason, err)
	}
	sub, err := c.SubscribeToTask(withExt, &a2apb.SubscribeToTaskRequest{Id: res.GetTask().GetId()})
	if err == nil {
		_, err = sub.Recv()
	}
	if code, reason := grpcStatus(err); code != codes.Unimplemented || reason != "UNSUPPORTED_OPERATION" {
		t.Errorf("SubscribeToTask: %s %s (%v)", code, reason, err)
	}
}
