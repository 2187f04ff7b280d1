package ingress_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/e2a-pipeline/pipeline/ingress"
)

// The wire points the official A2A TCK (v1.0 suite) checks, each with a
// real client: a2a-go/v2 where it can say it, its generated gRPC client
// for gRPC statuses, raw HTTP for the card's headers.

// tckCtx is a test's context with a deadline.
func tckCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// clientAt is an a2a-go/v2 client of binding at url (the card's
// interface replaced).
func clientAt(t *testing.T, card *a2a.AgentCard, binding a2a.TransportProtocol, url string) *a2aclient.Client {
	t.Helper()
	c2 := *card
	c2.SupportedInterfaces = []*a2a.AgentInterface{{URL: url, ProtocolBinding: binding, ProtocolVersion: a2a.Version}}
	c, err := a2aclient.NewFromCard(context.Background(), &c2)
	if err != nil {
		t.Fatalf("client at %s: %v", url, err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// TestA2AV1TrailingSlash: the JSON-RPC endpoints answer at their URL with
// a trailing slash too (httpx-based clients and the TCK post to
// "<url>/"): A2A v1.0 at /a2a/v1/ and /pools/demo/a2a/v1/ with the
// a2a-go/v2 client, v0.3 at /a2a/ (message/send).
func TestA2AV1TrailingSlash(t *testing.T) {
	p := startPipeline(t)
	ctx := tckCtx(t)
	card, err := agentcard.DefaultResolver.Resolve(ctx, p.url)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{ingress.A2AV1Path + "/", "/pools/demo" + ingress.A2AV1Path + "/"} {
		c := clientAt(t, card, a2a.TransportProtocolJSONRPC, p.url+path)
		res, err := c.SendMessage(ctx, userMessage("slash"))
		task, ok := res.(*a2a.Task)
		if err != nil || !ok || task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("SendMessage at %s: %+v, %v", path, res, err)
		}
		if got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID}); err != nil || got.ID != task.ID {
			t.Fatalf("GetTask at %s: %+v, %v", path, got, err)
		}
	}
	resp := p.post(t, "/a2a/", "", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m1","parts":[{"kind":"text","text":"slash"}]}}}`)
	var out struct {
		Result map[string]any `json:"result"`
		Error  any            `json:"error"`
	}
	if err := jsonDecode(resp, &out); err != nil || resp.StatusCode != http.StatusOK || out.Error != nil || out.Result["kind"] == nil {
		t.Fatalf("v0.3 message/send at /a2a/: %d %+v (%v)", resp.StatusCode, out, err)
	}
}

// grpcStatus is the code and ErrorInfo reason of a gRPC error.
func grpcStatus(err error) (codes.Code, string) {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return st.Code(), info.GetReason()
		}
	}
	return st.Code(), ""
}

// TestA2AV1GRPCSpecStatus: over gRPC, PushNotificationNotSupported and
// VersionNotSupported are UNIMPLEMENTED (A2A v1.0 §5.4, the TCK's
// GRPC-ERR-002), with their ErrorInfo reasons; SubscribeToTask on a
// finished task is UnsupportedOperation (kept FAILED_PRECONDITION, which
// a2a-go/v2's client reads back as ErrUnsupportedOperation) unless the
// call activates the replay extension, echoed in the response header.
func TestA2AV1GRPCSpecStatus(t *testing.T) {
	_, addr := startGRPCPipeline(t)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := a2apb.NewA2AServiceClient(conn)
	ctx := tckCtx(t)

	_, err = c.GetTaskPushNotificationConfig(ctx, &a2apb.GetTaskPushNotificationConfigRequest{TaskId: "t", Id: "c"})
	if code, reason := grpcStatus(err); code != codes.Unimplemented || reason != "PUSH_NOTIFICATION_NOT_SUPPORTED" {
		t.Errorf("GetTaskPushNotificationConfig: %s %s (%v)", code, reason, err)
	}
	msg := &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "m1", Role: a2apb.Role_ROLE_USER,
		Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hello"}}}}}
	_, err = c.SendMessage(metadata.AppendToOutgoingContext(ctx, "a2a-version", "99.0"), msg)
	if code, reason := grpcStatus(err); code != codes.Unimplemented || reason != "VERSION_NOT_SUPPORTED" {
		t.Errorf("SendMessage with A2A-Version 99.0: %s %s (%v)", code, reason, err)
	}

	res, err := c.SendMessage(ctx, msg)
	if err != nil || res.GetTask().GetStatus().GetState() != a2apb.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("SendMessage: %v, %v", res, err)
	}
	id := res.GetTask().GetId()
	sub, err := c.SubscribeToTask(ctx, &a2apb.SubscribeToTaskRequest{Id: id})
	if err == nil {
		_, err = sub.Recv()
	}
	if code, reason := grpcStatus(err); code != codes.FailedPrecondition || reason != "UNSUPPORTED_OPERATION" {
		t.Errorf("SubscribeToTask of a finished task: %s %s (%v)", code, reason, err)
	}
	replay := metadata.AppendToOutgoingContext(ctx, "a2a-extensions", ingress.A2AReplayExtension)
	sub, err = c.SubscribeToTask(replay, &a2apb.SubscribeToTaskRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	first, err := sub.Recv()
	if err != nil || first.GetTask().GetId() != id || first.GetTask().GetStatus().GetState() != a2apb.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("replayed SubscribeToTask: %v, %v", first, err)
	}
	if _, err := sub.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("replayed SubscribeToTask goes on after the task: %v", err)
	}
	if md, err := sub.Header(); err != nil || strings.Join(md.Get("a2a-extensions"), ",") != ingress.A2AReplayExtension {
		t.Errorf("replayed SubscribeToTask header a2a-extensions %v (%v)", md.Get("a2a-extensions"), err)
	}
}

// TestA2AV1StreamArtifactsHaveParts: on the three bindings, with the
// a2a-go/v2 client, every artifact-update of a stream carries at least
// one part (a2a.proto: parts REQUIRED; the pipeline used to close an
// artifact with an empty one), and the artifacts folded as A2A says
// (append, else replace) hold the answer the task holds.
func TestA2AV1StreamArtifactsHaveParts(t *testing.T) {
	p, _ := startGRPCPipeline(t)
	for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC} {
		t.Run(string(binding), func(t *testing.T) {
			_, c := v1Client(t, p, binding)
			ctx := tckCtx(t)
			folded := map[a2a.ArtifactID]string{}
			var taskID a2a.TaskID
			updates := 0
			for ev, err := range c.SendStreamingMessage(ctx, userMessage("stream me please")) {
				if err != nil {
					t.Fatalf("SendStreamingMessage: %v", err)
				}
				au, ok := ev.(*a2a.TaskArtifactUpdateEvent)
				if !ok {
					continue
				}
				updates++
				taskID = au.TaskID
				if au.Artifact == nil || len(au.Artifact.Parts) == 0 {
					t.Fatalf("artifact-update without parts: %+v", au)
				}
				if !au.Append {
					folded[au.Artifact.ID] = ""
				}
				folded[au.Artifact.ID] += v1Text(au.Artifact.Parts)
			}
			if updates == 0 {
				t.Fatal("no artifact-update")
			}
			task, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: taskID})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range task.Artifacts {
				if folded[a.ID] != v1Text(a.Parts) {
					t.Errorf("artifact %s folded from the stream %q, the task's %q", a.ID, folded[a.ID], v1Text(a.Parts))
				}
			}
			if !strings.Contains(strings.Join(mapValues(folded), ""), "You said: stream me please") {
				t.Errorf("folded artifacts %v", folded)
			}
		})
	}
}

func mapValues(m map[a2a.ArtifactID]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestA2AV1UnsupportedContent: a part of a media type the agent does not
// take is ContentTypeNotSupportedError on the three bindings (a2a-go/v2
// reads it back from HTTP 415, -32005 and INVALID_ARGUMENT).
func TestA2AV1UnsupportedContent(t *testing.T) {
	p, _ := startGRPCPipeline(t)
	for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC} {
		t.Run(string(binding), func(t *testing.T) {
			_, c := v1Client(t, p, binding)
			part := a2a.NewRawPart([]byte("tck"))
			part.MediaType = "application/x-unsupported"
			_, err := c.SendMessage(tckCtx(t), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, part)})
			if !errors.Is(err, a2a.ErrUnsupportedContentType) {
				t.Fatalf("SendMessage with an unsupported part: %v", err)
			}
		})
	}
}

// TestA2AV1CardGenerations: each A2A generation gets its card. A v1.0
// client (the card beside /a2a/v1, also a pool's, or A2A-Version 1.0)
// gets the v1.0 card alone: none of the v0.3 members the v1.0 schema
// forbids, the replay extension declared, and a2a-go/v2 resolves it and
// talks to the pipeline; anyone else the card of both generations. Every
// card has an ETag and a Last-Modified, 304 on If-None-Match, and varies
// by A2A-Version.
func TestA2AV1CardGenerations(t *testing.T) {
	p := startPipeline(t)
	v03 := []string{"url", "preferredTransport", "protocolVersion", "authSchemes", "additionalInterfaces", "security"}
	read := func(path string, hdr ...string) (map[string]any, *http.Response) {
		t.Helper()
		resp := p.get(t, path, hdr...)
		var m map[string]any
		if err := jsonDecode(resp, &m); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d (%v)", path, resp.StatusCode, err)
		}
		return m, resp
	}
	both, bothResp := read("/.well-known/agent-card.json")
	if both["url"] == nil || both["supportedInterfaces"] == nil || both["authSchemes"] == nil {
		t.Fatalf("the card of both generations: url %v, supportedInterfaces %v", both["url"], both["supportedInterfaces"])
	}
	for _, c := range []struct{ path, version string }{
		{ingress.A2AV1Path + "/.well-known/agent-card.json", ""},
		{"/.well-known/agent-card.json", "1.0"},
		{"/pools/demo" + ingress.A2AV1Path + "/.well-known/agent-card.json", ""},
	} {
		var hdr []string
		if c.version != "" {
			hdr = []string{"A2A-Version", c.version}
		}
		v1, resp := read(c.path, hdr...)
		for _, k := range v03 {
			if _, ok := v1[k]; ok {
				t.Errorf("%s (A2A-Version %q): v0.3 member %s", c.path, c.version, k)
			}
		}
		caps, _ := v1["capabilities"].(map[string]any)
		if _, ok := caps["stateTransitionHistory"]; ok || caps["streaming"] != true {
			t.Errorf("%s: capabilities %v", c.path, caps)
		}
		if b, _ := json.Marshal(caps["extensions"]); !strings.Contains(string(b), ingress.A2AReplayExtension) {
			t.Errorf("%s: the replay extension is not declared: %s", c.path, b)
		}
		if resp.Header.Get("ETag") == "" || resp.Header.Get("ETag") == bothResp.Header.Get("ETag") || resp.Header.Get("Last-Modified") == "" {
			t.Errorf("%s: ETag %q (both generations' %q), Last-Modified %q", c.path, resp.Header.Get("ETag"), bothResp.Header.Get("ETag"), resp.Header.Get("Last-Modified"))
		}
	}

	etag := bothResp.Header.Get("ETag")
	if _, err := time.Parse(http.TimeFormat, bothResp.Header.Get("Last-Modified")); err != nil || etag == "" || !strings.Contains(bothResp.Header.Get("Vary"), "A2A-Version") {
		t.Fatalf("card headers: ETag %q, Last-Modified %q (%v), Vary %q", etag, bothResp.Header.Get("Last-Modified"), err, bothResp.Header.Get("Vary"))
	}
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag} {
		resp := p.get(t, "/.well-known/agent-card.json", "If-None-Match", inm)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusNotModified || len(b) != 0 || resp.Header.Get("ETag") != etag {
			t.Errorf("If-None-Match %s: %d, %d bytes, ETag %q", inm, resp.StatusCode, len(b), resp.Header.Get("ETag"))
		}
	}
	if resp := p.get(t, "/.well-known/agent-card.json", "If-None-Match", `"other"`); resp.StatusCode != http.StatusOK {
		t.Errorf("If-None-Match of another card: %d", resp.StatusCode)
	}

	// a2a-go/v2 given the v1.0 interface URL reads the card beside it and
	// talks to the pipeline.
	ctx := tckCtx(t)
	card, err := agentcard.DefaultResolver.Resolve(ctx, p.url+ingress.A2AV1Path)
	if err != nil || len(card.SupportedInterfaces) == 0 {
		t.Fatalf("resolve the v1.0 card: %+v, %v", card, err)
	}
	c, err := a2aclient.NewFromCard(ctx, card)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	if res, err := c.SendMessage(ctx, userMessage("v1 card")); err != nil {
		t.Fatalf("SendMessage from the v1.0 card: %+v, %v", res, err)
	}
}
