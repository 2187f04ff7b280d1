package ingress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
)

// v1Client resolves the agent card with the A2A v1.0 SDK (a2a-go/v2) and
// builds its client preferring binding, as a v1.0 caller would.
func v1Client(t *testing.T, p *pipeline, binding a2a.TransportProtocol) (*a2a.AgentCard, *a2aclient.Client) {
	t.Helper()
	ctx := context.Background()
	card, err := agentcard.DefaultResolver.Resolve(ctx, p.url)
	if err != nil {
		t.Fatalf("resolve card: %v", err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())),
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{binding}}))
	if err != nil {
		t.Fatalf("client from card: %v", err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return card, c
}

func v1Text(parts a2a.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		if th, _ := p.Metadata["thought"].(bool); !th {
			b.WriteString(p.Text())
		}
	}
	return b.String()
}

func userMessage(text string) *a2a.SendMessageRequest {
	return &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))}
}

// TestA2AV1Card: one card serves both generations: the v1.0 SDK finds its
// interfaces, the v0.3 fields stay.
func TestA2AV1Card(t *testing.T) {
	p := startPipeline(t)
	card, _ := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	want := map[string]bool{
		"JSONRPC 1.0 " + p.url + ingress.A2AV1Path:   true,
		"HTTP+JSON 1.0 " + p.url + ingress.A2AV1Path: true,
		"JSONRPC 0.3 " + p.url + "/a2a":              true,
	}
	for _, i := range card.SupportedInterfaces {
		delete(want, string(i.ProtocolBinding)+" "+string(i.ProtocolVersion)+" "+i.URL)
	}
	if len(want) != 0 || !card.Capabilities.Streaming {
		t.Fatalf("card interfaces %+v: missing %v", card.SupportedInterfaces, want)
	}
	var m map[string]any
	if err := jsonDecode(p.get(t, "/.well-known/agent-card.json"), &m); err != nil || m["url"] != p.url+"/a2a" || m["preferredTransport"] != "JSONRPC" {
		t.Fatalf("v0.3 fields: %v %v (%v)", m["url"], m["preferredTransport"], err)
	}
	// The same card beside the v0.3 interface URL; beside the v1.0 one
	// (clients and the TCK given the interface URL look there) the v1.0
	// card alone: TestA2AV1CardGenerations.
	var beside map[string]any
	if err := jsonDecode(p.get(t, "/a2a/.well-known/agent-card.json"), &beside); err != nil || beside["url"] != m["url"] || beside["supportedInterfaces"] == nil {
		t.Fatalf("/a2a/.well-known/agent-card.json: %v (%v)", beside["url"], err)
	}
}

// TestA2AV1Client drives the pipeline with the a2a-go/v2 client over the
// three v1.0 bindings: send, stream, get, list, subscribe to a finished
// task, cancel a finished one, a message to a finished one, unknown tasks,
// push configs.
func TestA2AV1Client(t *testing.T) {
	p, _ := startGRPCPipeline(t)
	eachV1Binding(t, p, 30*time.Second, func(ctx context.Context, t *testing.T, binding a2a.TransportProtocol, c *a2aclient.Client) {

		res, err := c.SendMessage(ctx, userMessage("hello"))
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		task, ok := res.(*a2a.Task)
		if !ok || task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("SendMessage result %T %+v", res, res)
		}
		var reply string
		for _, a := range task.Artifacts {
			reply += v1Text(a.Parts)
		}
		if !strings.Contains(reply, "You said: hello") {
			t.Fatalf("reply %q", reply)
		}

		var events []a2a.Event
		for ev, err := range c.SendStreamingMessage(ctx, userMessage("stream me")) {
			if err != nil {
				t.Fatalf("SendStreamingMessage: %v", err)
			}
			events = append(events, ev)
		}
		first, ok := events[0].(*a2a.Task)
		if !ok || first.Status.State != a2a.TaskStateSubmitted {
			t.Fatalf("first event %T %+v", events[0], events[0])
		}
		last, ok := events[len(events)-1].(*a2a.TaskStatusUpdateEvent)
		if !ok || last.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("last event %T %+v", events[len(events)-1], events[len(events)-1])
		}
		var streamed string
		for _, ev := range events {
			if au, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
				streamed += v1Text(au.Artifact.Parts)
			}
		}
		if !strings.Contains(streamed, "You said: stream me") {
			t.Fatalf("streamed %q", streamed)
		}

		got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: last.TaskID})
		if err != nil || got.ID != last.TaskID || got.Status.State != a2a.TaskStateCompleted || len(got.Artifacts) == 0 {
			t.Fatalf("GetTask: %+v, %v", got, err)
		}

		// SubscribeToTask on a finished task is UnsupportedOperationError
		// (§3.1.6); with the replay extension activated it answers the
		// task rebuilt from the durable streams, and ends.
		for ev, err := range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: last.TaskID}) {
			if !errors.Is(err, a2a.ErrUnsupportedOperation) || ev != nil {
				t.Fatalf("SubscribeToTask of a finished task: %+v, %v; want UnsupportedOperationError", ev, err)
			}
		}
		replay := a2aclient.AttachServiceParams(ctx, a2aclient.ServiceParams{a2a.SvcParamExtensions: {ingress.A2AReplayExtension}})
		var replayed []a2a.Event
		for ev, err := range c.SubscribeToTask(replay, &a2a.SubscribeToTaskRequest{ID: last.TaskID}) {
			if err != nil {
				t.Fatalf("SubscribeToTask: %v", err)
			}
			replayed = append(replayed, ev)
		}
		snap, ok := replayed[0].(*a2a.Task)
		if len(replayed) != 1 || !ok || snap.Status.State != a2a.TaskStateCompleted || len(snap.Artifacts) == 0 || !strings.Contains(v1Text(snap.Artifacts[0].Parts), "You said: stream me") {
			t.Fatalf("SubscribeToTask of a finished task: %d events, first %+v", len(replayed), replayed[0])
		}

		list, err := c.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: last.ContextID})
		if err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != last.TaskID || list.TotalSize != 1 {
			t.Fatalf("ListTasks by context: %+v, %v", list, err)
		}

		if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: last.TaskID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
			t.Fatalf("CancelTask of a finished task: %v", err)
		}
		// A finished task takes no more messages (§3.1.1).
		more := userMessage("more")
		more.Message.TaskID = last.TaskID
		if _, err := c.SendMessage(ctx, more); !errors.Is(err, a2a.ErrUnsupportedOperation) {
			t.Fatalf("SendMessage to a finished task: %v", err)
		}
		if _, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: "no-such-task"}); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Fatalf("GetTask unknown: %v", err)
		}
		// Over gRPC the status is UNIMPLEMENTED (§5.4), which a2a-go/v2's
		// client reads back as an internal error (its table pairs the
		// reason with FAILED_PRECONDITION): TestA2AV1GRPCSpecStatus checks
		// that binding with the generated gRPC client.
		if _, err := c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: last.TaskID, ID: "x"}); binding != a2a.TransportProtocolGRPC && !errors.Is(err, a2a.ErrPushNotificationNotSupported) {
			t.Fatalf("GetTaskPushConfig: %v", err)
		}
	})
}

// TestA2AV1ListPages: ListTasks pages with its cursor through every task,
// newest first, each once.
func TestA2AV1ListPages(t *testing.T) {
	p := startPipeline(t)
	_, c := v1Client(t, p, a2a.TransportProtocolHTTPJSON)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 5
	for i := range n {
		if _, err := c.SendMessage(ctx, userMessage("task "+string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[a2a.TaskID]bool{}
	token := ""
	for pages := 0; ; pages++ {
		list, err := c.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 2, PageToken: token})
		if err != nil {
			t.Fatalf("ListTasks: %v", err)
		}
		if list.TotalSize != n || len(list.Tasks) > 2 {
			t.Fatalf("page %d: %d tasks, total %d", pages, len(list.Tasks), list.TotalSize)
		}
		for _, task := range list.Tasks {
			if seen[task.ID] || len(task.Artifacts) != 0 {
				t.Fatalf("task %s twice, or with artifacts not asked for", task.ID)
			}
			seen[task.ID] = true
		}
		if token = list.NextPageToken; token == "" {
			break
		}
	}
	if len(seen) != n {
		t.Fatalf("listed %d of %d tasks", len(seen), n)
	}
	if _, err := c.ListTasks(ctx, &a2a.ListTasksRequest{PageToken: "%%%"}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Fatalf("bad page token: %v", err)
	}
}

// runSlowAgent runs pool "slow": an agent that reports each request on
// started and then waits to be cancelled.
func runSlowAgent(t *testing.T, p *pipeline, started chan<- struct{}, opts ...agent.Option) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = agent.Run(ctx, p.nc, "slow", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
			select {
			case started <- struct{}{}:
			default:
			}
			<-ctx.Done()
			return ctx.Err()
		}), opts...)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// cancelRunning sends a message with returnImmediately to an agent that
// reports it on started and waits, then cancels the task, which must answer
// canceled.
func cancelRunning(ctx context.Context, t *testing.T, c *a2aclient.Client, started <-chan struct{}) {
	t.Helper()
	req := userMessage("wait for me")
	req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	res, err := c.SendMessage(ctx, req)
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateSubmitted {
		t.Fatalf("returnImmediately answered %T %+v", res, res)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the agent never got the request")
	}
	got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask of a running task: %+v, %v", got, err)
	}
}

// TestA2AV1CancelRunning: a running task (an agent that waits to be
// cancelled) sent with returnImmediately is cancelled by CancelTask, which
// answers it canceled.
func TestA2AV1CancelRunning(t *testing.T) {
	p := startPipeline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	started := make(chan struct{}, 1)
	runSlowAgent(t, p, started)

	c, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{
		a2a.NewAgentInterface(p.url+ingress.A2AV1Path+"?agent=slow", a2a.TransportProtocolJSONRPC)})
	if err != nil {
		t.Fatal(err)
	}
	cancelRunning(ctx, t, c, started)
}

// TestA2AV1Errors: what the SDK's client never sends: a v0.3 method on the
// v1.0 interface (-32601 naming /a2a), a v1.0 method on /a2a (served), an
// A2A-Version this interface does not serve (VersionNotSupported), an
// unknown task over REST (404).
func TestA2AV1Errors(t *testing.T) {
	p := startPipeline(t)
	r := p.post(t, ingress.A2AV1Path, "", `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{}}`)
	body, _ := io.ReadAll(r.Body)
	if !strings.Contains(string(body), `"code":-32601`) || !strings.Contains(string(body), `"id":7`) || !strings.Contains(string(body), "served at /a2a") {
		t.Fatalf("v0.3 method on v1.0: %s", body)
	}
	// The v0.3 endpoint serves single v1.0 calls too (clients and the TCK
	// that take the card's v0.3 url for JSON-RPC).
	r = p.post(t, "/a2a", "", `{"jsonrpc":"2.0","id":8,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m8","parts":[{"text":"both"}]}}}`)
	body, _ = io.ReadAll(r.Body)
	if !strings.Contains(string(body), `"id":8`) || !strings.Contains(string(body), "You said: both") || !strings.Contains(string(body), "TASK_STATE_COMPLETED") {
		t.Fatalf("v1.0 method on /a2a: %s", body)
	}
	r = p.post(t, "/a2a", "", `{"jsonrpc":"2.0","id":9,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m9","parts":[{"kind":"text","text":"SendMessage"}]}}}`)
	body, _ = io.ReadAll(r.Body)
	if !strings.Contains(string(body), `"id":9`) || !strings.Contains(string(body), `"state":"completed"`) {
		t.Fatalf("v0.3 call naming a v1.0 method in its text: %s", body)
	}
	// A2A-Version other than 1.0: VersionNotSupported in each binding.
	req, _ := http.NewRequest(http.MethodPost, p.url+ingress.A2AV1Path+"/message:send",
		strings.NewReader(`{"message":{"role":"ROLE_USER","parts":[{"text":"Hello"}],"messageId":"msg-uuid"}}`))
	req.Header.Set("A2A-Version", "0.5")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "VERSION_NOT_SUPPORTED") {
		t.Fatalf("REST with A2A-Version 0.5: %d %s", resp.StatusCode, body)
	}
	req, _ = http.NewRequest(http.MethodPost, p.url+ingress.A2AV1Path,
		strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"GetTask","params":{"id":"x"}}`))
	req.Header.Set("A2A-Version", "0.3")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"code":-32009`) {
		t.Fatalf("JSON-RPC with A2A-Version 0.3: %s", body)
	}
	r = p.get(t, ingress.A2AV1Path+"/tasks/no-such-task")
	body, _ = io.ReadAll(r.Body)
	if r.StatusCode != http.StatusNotFound {
		t.Fatalf("REST unknown task: %d %s", r.StatusCode, body)
	}
}

// TestA2AV1SubscribeRunning: SubscribeToTask on a running task (the demo
// agent paced from the message metadata) answers the task as it stands,
// then its later events live, to the completed state.
func TestA2AV1SubscribeRunning(t *testing.T) {
	p := startPipeline(t)
	_, c := v1Client(t, p, a2a.TransportProtocolJSONRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := userMessage("slowly")
	req.Message.Metadata = map[string]any{"delay_ms": 100, "frames": 10}
	req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	res, err := c.SendMessage(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	var events []a2a.Event
	for ev, err := range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
		if err != nil {
			t.Fatalf("SubscribeToTask: %v", err)
		}
		events = append(events, ev)
	}
	first, ok := events[0].(*a2a.Task)
	if !ok || first.Status.State.Terminal() {
		t.Fatalf("first event %T %+v", events[0], events[0])
	}
	end, ok := events[len(events)-1].(*a2a.TaskStatusUpdateEvent)
	if !ok || end.Status.State != a2a.TaskStateCompleted || len(events) < 3 {
		t.Fatalf("%d events, last %+v", len(events), events[len(events)-1])
	}
	// Snapshot plus live events hold the whole reply, once.
	text := ""
	for _, m := range first.History {
		if m.Role == a2a.MessageRoleAgent {
			text += v1Text(m.Parts)
		}
	}
	for _, a := range first.Artifacts {
		text += v1Text(a.Parts)
	}
	for _, ev := range events[1:] {
		if au, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
			text += v1Text(au.Artifact.Parts)
		}
	}
	if text != "You said: slowly" {
		t.Fatalf("reply across snapshot and live events %q", text)
	}
}

// v1Parts counts what a client got in events: thought parts, the trpc
// interaction spec's function_call/function_response DataParts, and
// DataParts in all.
func v1Parts(evs ...a2a.Event) (thoughts, tools, data int) {
	count := func(parts a2a.ContentParts) {
		for _, p := range parts {
			if th, _ := p.Metadata["thought"].(bool); th {
				thoughts++
			}
			if p.Data() != nil {
				data++
				if typ, _ := p.Metadata["type"].(string); typ == "function_call" || typ == "function_response" {
					tools++
				}
			}
		}
	}
	msg := func(m *a2a.Message) {
		if m != nil {
			count(m.Parts)
		}
	}
	for _, ev := range evs {
		switch e := ev.(type) {
		case *a2a.TaskArtifactUpdateEvent:
			count(e.Artifact.Parts)
		case *a2a.TaskStatusUpdateEvent:
			msg(e.Status.Message)
		case *a2a.Message:
			msg(e)
		case *a2a.Task:
			msg(e.Status.Message)
			for _, m := range e.History {
				msg(m)
			}
			for _, a := range e.Artifacts {
				count(a.Parts)
			}
		}
	}
	return thoughts, tools, data
}

// TestA2AV1InteractionAndOutputModes: on every binding, as on v0.3, a
// basic client gets no thought parts and no function_call/function_response
// DataParts, one that declares the trpc interaction spec (message metadata)
// gets them, and one whose acceptedOutputModes admit no JSON gets no
// DataPart; streamed and sent alike.
func TestA2AV1InteractionAndOutputModes(t *testing.T) {
	p, _ := startGRPCPipeline(t)
	req := func(interaction bool, modes ...string) *a2a.SendMessageRequest {
		r := userMessage("parts please")
		if interaction {
			r.Message.Metadata = map[string]any{"interaction_spec_version": "0.1"}
		}
		if len(modes) > 0 {
			r.Config = &a2a.SendMessageConfig{AcceptedOutputModes: modes}
		}
		return r
	}
	eachV1Binding(t, p, 30*time.Second, func(ctx context.Context, t *testing.T, binding a2a.TransportProtocol, c *a2aclient.Client) {
		for _, tc := range []struct {
			name                  string
			req                   *a2a.SendMessageRequest
			thoughts, tools, data bool // whether any is wanted
		}{
			{"basic", req(false), false, false, false},
			{"interaction", req(true), true, true, true},
			{"text only", req(true, "text/plain"), true, false, false},
		} {
			var evs []a2a.Event
			for ev, err := range c.SendStreamingMessage(ctx, tc.req) {
				if err != nil {
					t.Fatalf("%s: SendStreamingMessage: %v", tc.name, err)
				}
				evs = append(evs, ev)
			}
			res, err := c.SendMessage(ctx, tc.req)
			if err != nil {
				t.Fatalf("%s: SendMessage: %v", tc.name, err)
			}
			for what, got := range map[string][]a2a.Event{"stream": evs, "send": {res}} {
				th, tools, data := v1Parts(got...)
				if (th > 0) != tc.thoughts || (tools > 0) != tc.tools || (data > 0) != tc.data {
					t.Errorf("%s %s: %d thought parts, %d tool parts, %d DataParts", tc.name, what, th, tools, data)
				}
			}
		}
	})
}

// TestA2AV1StreamSlotReleased: a v1.0 stream (streamed by egress) holds
// one of the caller's stream slots while it is open and gives it back
// when its client goes away mid-stream: with one slot, a second stream is
// refused while the first is open and served once its client has gone.
func TestA2AV1StreamSlotReleased(t *testing.T) {
	lim := ingress.NewStreamLimiter(1)
	p := startPipelineWith(t, ingress.WithStreamLimiter(lim))
	started := make(chan struct{}, 1)
	// Its requests are never finished: no drain when the test ends.
	runSlowAgent(t, p, started, agent.WithDrainTimeout(0))
	body := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"SendStreamingMessage","params":{"message":`+
			`{"messageId":"m-%d","role":"ROLE_USER","parts":[{"text":"wait"}]}}}`, id, id)
	}
	open := func(id int) (*http.Response, context.CancelFunc) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+ingress.A2AV1Path+"?agent=slow", strings.NewReader(body(id)))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, cancel
	}
	first, cancelFirst := open(1)
	<-started // the agent has the first request: its stream is open
	second, cancelSecond := open(2)
	b, _ := io.ReadAll(second.Body)
	cancelSecond()
	if second.StatusCode != http.StatusTooManyRequests || second.Header.Get("Retry-After") != "1" || !strings.Contains(string(b), `"code":-32029`) {
		t.Fatalf("a second stream with the slot taken: %d %s", second.StatusCode, b)
	}
	// The first client goes away mid-stream: its slot comes back.
	cancelFirst()
	first.Body.Close()
	idle, cancelIdle := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelIdle()
	if err := lim.WaitIdle(idle); err != nil {
		t.Fatalf("%d stream slots still held after the client left: %v", lim.Total(), err)
	}
	third, cancelThird := open(3)
	defer cancelThird()
	// Admitted: the stream holds the slot (its first event comes with the
	// agent's first frame, which this agent never writes).
	if third.StatusCode != http.StatusOK || lim.Total() != 1 {
		t.Fatalf("the stream after the slot came back: status %d, %d slots held", third.StatusCode, lim.Total())
	}
}

// eachV1Binding runs f against p once per binding, in a subtest named for
// it, with the binding's a2a-go/v2 client and a context that ends after
// timeout.
func eachV1Binding(t *testing.T, p *pipeline, timeout time.Duration,
	f func(ctx context.Context, t *testing.T, binding a2a.TransportProtocol, c *a2aclient.Client)) {
	t.Helper()
	for _, binding := range v1Bindings {
		t.Run(string(binding), func(t *testing.T) {
			_, c := v1Client(t, p, binding)
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			f(ctx, t, binding, c)
		})
	}
}
