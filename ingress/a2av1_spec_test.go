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
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// A2A v1.0 (REST, JSON-RPC, gRPC) against the specification: what the
// pinned TCK does not exercise.

// v1RPC posts one JSON-RPC call to the v1.0 endpoint and returns its
// decoded answer (a JSON object, not a stream).
func v1RPC(t *testing.T, p *pipeline, body string) (status int, out map[string]any) {
	t.Helper()
	r := p.post(t, ingress.A2AV1Path, "", body)
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: answer is not one JSON object: %d %s", body, r.StatusCode, b)
	}
	return r.StatusCode, out
}

// TestA2AV1RPCWithoutParams: A2A v1.0 §9.4.8 gives GetExtendedAgentCard's
// JSON-RPC request without "params" (JSON-RPC 2.0: params MAY be omitted), and
// ListTasks, whose request fields are all optional, may be sent so too: both
// are answered as with "params":{}. The spec's own example was answered
// -32700 Parse error.
func TestA2AV1RPCWithoutParams(t *testing.T) {
	p := startPipeline(t)
	for _, method := range []string{"GetExtendedAgentCard", "ListTasks"} {
		_, out := v1RPC(t, p, `{"jsonrpc":"2.0","id":6,"method":"`+method+`"}`)
		if e, ok := out["error"].(map[string]any); ok {
			t.Errorf("%s without params (JSON-RPC 2.0 lets a call omit them; §9.4.8's GetExtendedAgentCard example does): "+
				"error %v %q; want the result, as with \"params\":{}",
				method, e["code"], e["message"])
		}
	}
}

// TestA2AV1TooManyStreamsNotInternal: a stream refused because the
// principal's stream slots are taken is answered 429 with Retry-After
// (docs/configuration.md, E2A_MAX_STREAMS_PER_PRINCIPAL: "A2A/AgentVault
// streams"; v0.3 and E2A answer it so), RESOURCE_EXHAUSTED over gRPC. The
// v1.0 bindings answered it as an internal server error (HTTP+JSON 500
// INTERNAL in a 200 stream, gRPC INTERNAL), which says nothing of a retry.
func TestA2AV1TooManyStreamsNotInternal(t *testing.T) {
	lim := ingress.NewStreamLimiter(1)
	p, addr := startGRPCPipeline(t, ingress.WithStreamLimiter(lim))
	started := make(chan struct{}, 1)
	runSlowAgent(t, p, started, agent.WithDrainTimeout(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The one slot: a stream to the slow agent, held open.
	hold, stop := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(hold, http.MethodPost, p.url+ingress.A2AV1Path+"/message:stream?agent=slow",
		strings.NewReader(`{"message":{"messageId":"hold","role":"ROLE_USER","parts":[{"text":"wait"}]}}`))
	first, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { stop(); first.Body.Close() }()
	testkit.Receive(t, started, 10*time.Second, "the agent never got the first stream's request")

	// HTTP+JSON.
	resp, err := http.Post(p.url+ingress.A2AV1Path+"/message:stream?agent=slow", "application/json",
		strings.NewReader(`{"message":{"messageId":"second","role":"ROLE_USER","parts":[{"text":"wait"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests && !strings.Contains(string(b), "RESOURCE_EXHAUSTED") {
		t.Errorf("HTTP+JSON message:stream with the principal's stream slots taken: %d %q; want 429 (RESOURCE_EXHAUSTED, "+
			"Retry-After), not an internal server error", resp.StatusCode, b)
	}
	// gRPC: the service's own client, to read the status code as sent.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := a2apb.NewA2AServiceClient(conn).SendStreamingMessage(metadata.AppendToOutgoingContext(ctx, ingress.GRPCAgentMetadata, "slow"),
		&a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "third", Role: a2apb.Role_ROLE_USER,
			Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "wait"}}}}})
	if err == nil {
		_, err = stream.Recv()
	}
	if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted || retryDelay(st) != time.Second {
		t.Errorf("gRPC SendStreamingMessage with the principal's stream slots taken: %v %q, RetryInfo %v; want RESOURCE_EXHAUSTED "+
			"with a RetryInfo of 1s (HTTP's Retry-After: 1), not an internal error", st.Code(), st.Message(), retryDelay(st))
	}
}

// TestBlockingSendTakesAStreamSlot: a blocking A2A send (v0.3 message/send,
// blocking unless configuration.blocking is false; v1.0 SendMessage without
// returnImmediately, on its three bindings) holds its answer open until
// the agent's final frame, as an E2A ?wait=true does, and so takes one of
// the principal's stream slots (E2A_MAX_STREAMS_PER_PRINCIPAL): with its
// slots taken it is refused 429 (JSON-RPC -32029, gRPC RESOURCE_EXHAUSTED)
// with nothing published. It took none: a principal whose slots were all
// taken still held any number of blocking sends open (each an egress
// answer, its subscription and buffers), the bound that keeps one tenant
// from holding a replica's answers stepped around by the protocol most
// clients use. A send answered at once (blocking false, returnImmediately)
// takes none, as an E2A 202 does.
func TestBlockingSendTakesAStreamSlot(t *testing.T) {
	lim := ingress.NewStreamLimiter(1)
	p, addr := startGRPCPipeline(t, ingress.WithStreamLimiter(lim))
	started := make(chan struct{}, 1)
	runSlowAgent(t, p, started, agent.WithDrainTimeout(0))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The principal's one slot: an E2A stream to the slow agent, held open.
	stop := holdSlowStream(t, p, started)
	defer stop()
	before := streamMsgs(t, p.js, streams.RequestsStream)
	published := func(t *testing.T, what string) {
		t.Helper()
		if after := streamMsgs(t, p.js, streams.RequestsStream); after != before {
			was := before
			before = after // the next case counts from here
			t.Fatalf("%s: E2A_REQUESTS went from %d to %d messages: the refused send was published", what, was, after)
		}
		if n := lim.Total(); n != 1 {
			t.Fatalf("%s: %d stream slots held; want the held stream's 1", what, n)
		}
	}

	v03 := func(blocking string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user",` +
			`"parts":[{"kind":"text","text":"hi"}]}` + blocking + `}}`
	}
	v1 := `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}`
	for _, tc := range []struct {
		name, path, body string
		batch            bool // a batch waits for each blocking send it holds: its element is refused in the batch's answer
	}{
		{"a2a-v03", "/a2a?agent=slow", v03(""), false},
		{"a2a-v03-blocking-true", "/a2a?agent=slow", v03(`,"configuration":{"blocking":true}`), false},
		{"a2a-v03-batch", "/a2a?agent=slow", "[" + v03("") + "]", true},
		{"a2a-v1-jsonrpc", ingress.A2AV1Path + "?agent=slow", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":` + v1 + `}`, false},
		{"a2a-v1-rest", ingress.A2AV1Path + "/message:send?agent=slow", v1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Bounded: without the slot the send is published and waits
			// for an answer the slow agent never writes.
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			defer ccancel()
			req, err := http.NewRequestWithContext(cctx, http.MethodPost, p.url+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			var b []byte
			if err == nil {
				b, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if err != nil {
				was := before
				before = streamMsgs(t, p.js, streams.RequestsStream) // the next case counts from here
				t.Fatalf("a blocking send with the principal's stream slots taken: %v (E2A_REQUESTS %d messages, %d before); "+
					"want it refused too many concurrent streams, nothing published", err, before, was)
			}
			refused := resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "1"
			if tc.batch {
				refused = strings.Contains(string(b), `"code":-32029`)
			}
			if !refused || !strings.Contains(string(b), "too many concurrent streams") {
				t.Fatalf("a blocking send with the principal's stream slots taken: %d Retry-After %q %s; want 429, Retry-After 1 "+
					"(a batch's element: -32029), too many concurrent streams", resp.StatusCode, resp.Header.Get("Retry-After"), b)
			}
			published(t, tc.name)
		})
	}
	t.Run("a2a-v1-grpc", func(t *testing.T) {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		_, err = a2apb.NewA2AServiceClient(conn).SendMessage(metadata.AppendToOutgoingContext(cctx, ingress.GRPCAgentMetadata, "slow"),
			grpcProtoMsg("m", "hi"))
		if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted || retryDelay(st) != time.Second {
			t.Fatalf("gRPC SendMessage with the principal's stream slots taken: %v %q, RetryInfo %v; want RESOURCE_EXHAUSTED "+
				"with a RetryInfo of 1s", st.Code(), st.Message(), retryDelay(st))
		}
		published(t, "gRPC SendMessage")
	})

	// Answered at once: no slot, accepted while the principal's are taken.
	for _, tc := range []struct{ name, path, body, want string }{
		{"a2a-v03-nonblocking", "/a2a?agent=slow", v03(`,"configuration":{"blocking":false}`), `"kind":"task"`},
		{"a2a-v1-return-immediately", ingress.A2AV1Path + "/message:send?agent=slow",
			`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]},"configuration":{"returnImmediately":true}}`, `TASK_STATE_SUBMITTED`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := do(t, http.MethodPost, p.url+tc.path, tc.body, "Content-Type", "application/json")
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), tc.want) {
				t.Fatalf("a send answered at once, with the principal's stream slots taken: %d %s; want 200 and the task", resp.StatusCode, b)
			}
			if n := lim.Total(); n != 1 {
				t.Fatalf("%d stream slots held after a send answered at once; want the held stream's 1", n)
			}
		})
	}

	// A blocking send's slot is given back with its answer.
	stop()
	if err := lim.WaitIdle(ctx); err != nil {
		t.Fatalf("the held stream's slot: %v", err)
	}
	resp, b := do(t, http.MethodPost, p.url+"/a2a", v03(""), "Content-Type", "application/json")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"result"`) {
		t.Fatalf("a blocking send to the demo pool with a slot free: %d %s", resp.StatusCode, b)
	}
	if err := lim.WaitIdle(ctx); err != nil {
		t.Fatalf("the blocking send's slot not given back after its answer: %d held: %v", lim.Total(), err)
	}
}

// retryDelay is the delay of st's google.rpc.RetryInfo detail, 0 without one.
func retryDelay(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// TestA2AV1RESTTenantPath: a2a.proto's
// additional_bindings put every HTTP+JSON route under /{tenant}; the SDK's
// REST client sends a request's tenant there. Each task method reached that
// way answers as without the prefix, and errors keep their kinds.
func TestA2AV1RESTTenantPath(t *testing.T) {
	p := startPipeline(t)
	_, c := v1Client(t, p, a2a.TransportProtocolHTTPJSON)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	send := userMessage("tenanted")
	send.Tenant = "demo"
	res, err := c.SendMessage(ctx, send)
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("SendMessage with tenant: %T %+v", res, res)
	}
	if g, err := c.GetTask(ctx, &a2a.GetTaskRequest{Tenant: "demo", ID: task.ID}); err != nil || g.ID != task.ID {
		t.Fatalf("GetTask with tenant: %+v %v", g, err)
	}
	list, err := c.ListTasks(ctx, &a2a.ListTasksRequest{Tenant: "demo", ContextID: task.ContextID})
	if err != nil || len(list.Tasks) != 1 {
		t.Fatalf("ListTasks with tenant: %+v %v", list, err)
	}
	if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{Tenant: "demo", ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Fatalf("CancelTask of a completed task with tenant: %v", err)
	}
	var subErr error
	for _, err := range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{Tenant: "demo", ID: task.ID}) {
		if err != nil {
			subErr = err
			break
		}
	}
	if !errors.Is(subErr, a2a.ErrUnsupportedOperation) {
		t.Fatalf("SubscribeToTask of a completed task with tenant: %v", subErr)
	}
	if _, err := c.GetTask(ctx, &a2a.GetTaskRequest{Tenant: "demo", ID: "no-such-task"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("GetTask of an unknown task with tenant: %v", err)
	}
	// A body's tenant naming another pool than the path's.
	r := p.post(t, ingress.A2AV1Path+"/demo/message:send", "",
		`{"tenant":"other","message":{"role":"ROLE_USER","messageId":"m-t","parts":[{"text":"x"}]}}`)
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "INVALID_ARGUMENT") {
		t.Fatalf("body tenant naming another pool than the path's: %d %s", r.StatusCode, b)
	}
}

// TestA2AV1MalformedNever500: malformed JSON, wrong
// types, absent or empty required members, out-of-range query parameters
// and oversized bodies on the HTTP+JSON and JSON-RPC bindings are answered
// with a 4xx (or a JSON-RPC error other than internal), never a 5xx.
func TestA2AV1MalformedNever500(t *testing.T) {
	p := startPipeline(t)
	v1, msg := ingress.A2AV1Path, `{"role":"ROLE_USER","messageId":"m1","parts":[{"text":"x"}]}`
	big := `{"message":{"role":"ROLE_USER","messageId":"m","parts":[{"text":"` + strings.Repeat("a", 70<<10) + `"}]}}`
	cases := [][3]string{
		{"POST", v1 + "/message:send", `{`}, {"POST", v1 + "/message:send", `[]`}, {"POST", v1 + "/message:send", `{"message":5}`},
		{"POST", v1 + "/message:send", `{"message":{"role":"ROLE_USER","messageId":"m","parts":[{}]}}`},
		{"POST", v1 + "/message:send", `{"message":{"role":"ROLE_BOGUS","messageId":"m","parts":[{"text":"x"}]}}`},
		{"POST", v1 + "/message:send", `{"message":{"role":"ROLE_USER","messageId":"m","parts":[{"raw":"!!!"}]}}`},
		{"POST", v1 + "/message:send", `{"message":` + msg + `,"configuration":{"historyLength":"x"}}`},
		{"POST", v1 + "/message:send", `{"message":{"role":"ROLE_USER","messageId":"m","parts":[{"data":` +
			strings.Repeat(`[`, 3000) + strings.Repeat(`]`, 3000) + `}]}}`},
		{"POST", v1 + "/message:send", big}, {"POST", v1 + "/message:stream", big}, {"POST", v1 + "/message:stream", `{"message":5}`},
		{"GET", v1 + "/tasks?pageSize=abc", ""}, {"GET", v1 + "/tasks?pageSize=1000", ""}, {"GET", v1 + "/tasks?status=bogus", ""},
		{"GET", v1 + "/tasks?statusTimestampAfter=yesterday", ""}, {"GET", v1 + "/tasks?includeArtifacts=maybe", ""},
		{"GET", v1 + "/tasks?pageToken=garbage", ""}, {"GET", v1 + "/tasks/x?historyLength=abc", ""},
		{"GET", v1 + "/tasks/:subscribe", ""}, {"POST", v1 + "/tasks/x:bogus", ""}, {"POST", v1 + "/tasks/x/pushNotificationConfigs", `{"url":5}`},
		{"GET", v1 + "/bad%20pool/tasks", ""},
		{"POST", v1, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":5}`},
		{"POST", v1, `{"jsonrpc":"2.0","id":1,"method":5}`},
		{"POST", v1, `{"jsonrpc":"2.0","id":{},"method":"GetTask","params":{"id":"x"}}`},
		{"POST", v1, `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":"x"}}`},
		{"POST", v1, `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":5}`},
		{"POST", v1, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m","parts":[{"data":` +
			strings.Repeat(`{"a":`, 3000) + `1` + strings.Repeat(`}`, 3000) + `}]}}}`},
		{"POST", v1, strings.Repeat("[", 5000)}, {"POST", v1, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":` + big + `}`},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c[0], p.url+c[1], strings.NewReader(c[2]))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c[0], c[1], err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s := string(b)
		if resp.StatusCode >= 500 || strings.Contains(s, `"INTERNAL"`) || strings.Contains(s, `"code":-32603`) || strings.Contains(s, `"code":-32000`) {
			t.Errorf("%s %s %.80s: %d %.200s; want a client error", c[0], c[1], c[2], resp.StatusCode, s)
		}
	}
}

// TestA2AV1GRPCRefusalSaysWhenToRetry: a gRPC call over the principal's
// rate limit is RESOURCE_EXHAUSTED with a google.rpc.RetryInfo detail
// saying how long to wait, as the HTTP bindings' Retry-After does; so is a
// stream refused for want of a stream slot (1 s). The status carried a
// message only: a gRPC client could not tell when to retry.
func TestA2AV1GRPCRefusalSaysWhenToRetry(t *testing.T) {
	_, addr := startGRPCPipeline(t, ingress.WithLimiter(ingress.NewLimiter(nil, ingress.LimiterConfig{Limits: ingress.RateLimits{PerMinute: 1}}, ingress.WithLimiterClock(testkit.MidMinute()))))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := a2apb.NewA2AServiceClient(conn)
	var err2 error
	for range 2 {
		_, err2 = c.ListTasks(ctx, &a2apb.ListTasksRequest{})
	}
	st, _ := status.FromError(err2)
	delay := retryDelay(st)
	if st.Code() != codes.ResourceExhausted || delay <= 0 || delay > time.Minute {
		t.Errorf("second call over 1 a minute: %v %q, RetryInfo %v; want RESOURCE_EXHAUSTED with a RetryInfo delay in (0, 1m]",
			st.Code(), st.Message(), delay)
	}
}

// TestA2AV1UncleanPathAnsweredJSON: an HTTP+JSON path with an empty
// segment (tasks//pushNotificationConfigs: a missing task id, a double
// slash) or a "." or ".." one, bare or under a pool's prefix, is answered
// as the binding answers a path none of its routes takes: 404 NOT_FOUND
// in its JSON error shape. http.ServeMux answered 307 Temporary Redirect
// with an HTML page, to another resource (tasks/pushNotificationConfigs).
func TestA2AV1UncleanPathAnsweredJSON(t *testing.T) {
	p := startPipeline(t)
	v1 := ingress.A2AV1Path
	for _, c := range [][2]string{
		{"GET", v1 + "/tasks//pushNotificationConfigs"}, {"GET", v1 + "//tasks"},
		{"POST", v1 + "/tasks//pushNotificationConfigs"}, {"DELETE", v1 + "/tasks/x/pushNotificationConfigs//"},
		{"GET", v1 + "/tasks/x/pushNotificationConfigs/."}, {"GET", v1 + "/tasks/x/pushNotificationConfigs/.."},
		{"POST", v1 + "//message:send"}, {"GET", "/pools/demo" + v1 + "/tasks//pushNotificationConfigs"},
	} {
		req, _ := http.NewRequest(c[0], p.url+c[1], strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultTransport.RoundTrip(req) // no redirect followed
		if err != nil {
			t.Fatalf("%s %s: %v", c[0], c[1], err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusNotFound || ct != "application/json" ||
			!strings.Contains(string(b), `{"error":{"code":404,"message":"no route of the A2A v1.0 HTTP+JSON binding here","status":"NOT_FOUND"}}`) {
			t.Errorf("%s %s: %d %s %.200s; want the binding's 404 NOT_FOUND", c[0], c[1], resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
	}
}
