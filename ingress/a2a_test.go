package ingress_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// a2aClient resolves the agent card and builds the real a2a-go client from
// it, as any A2A caller would.
func a2aClient(t *testing.T, p *pipeline) (*a2a.AgentCard, *a2aclient.Client) {
	t.Helper()
	ctx := context.Background()
	card, err := agentcard.NewResolver(nil).Resolve(ctx, p.url)
	if err != nil {
		t.Fatalf("resolve card: %v", err)
	}
	c, err := a2aclient.NewFromCard(ctx, card)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return card, c
}

func textOf(parts a2a.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		if tp, ok := p.(a2a.TextPart); ok {
			if th, _ := tp.Metadata["thought"].(bool); !th {
				b.WriteString(tp.Text)
			}
		}
	}
	return b.String()
}

func TestA2AClientCard(t *testing.T) {
	p := startPipeline(t)
	card, _ := a2aClient(t, p)
	if card.URL != p.url+"/a2a" || !card.Capabilities.Streaming || card.ProtocolVersion != "0.3.0" {
		t.Fatalf("card %+v", card)
	}
	var found bool
	for _, e := range card.Capabilities.Extensions {
		if e.URI == "trpc-a2a-version" && e.Params["version"] == "0.1" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no trpc-a2a-version extension: %+v", card.Capabilities.Extensions)
	}
	// The legacy path serves the same card.
	if r := p.get(t, "/.well-known/agent.json"); r.StatusCode != 200 {
		t.Fatalf("agent.json: %d", r.StatusCode)
	}
	// X-Forwarded-* decides the URL behind a proxy.
	r := p.get(t, "/.well-known/agent-card.json", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "agents.example.com")
	var m map[string]any
	if err := jsonDecode(r, &m); err != nil || m["url"] != "https://agents.example.com/a2a" {
		t.Fatalf("forwarded card url %v (%v)", m["url"], err)
	}
}

func TestA2AClientSendStreamGetCancel(t *testing.T) {
	p := startPipeline(t)
	_, c := a2aClient(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// message/send: the demo agent streams several frames, so the result is
	// a Task whose artifacts hold the reply.
	res, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hello"})})
	if err != nil {
		t.Fatalf("message/send: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("message/send result %T", res)
	}
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("state %s", task.Status.State)
	}
	var reply string
	for _, a := range task.Artifacts {
		reply += textOf(a.Parts)
	}
	if !strings.Contains(reply, "You said: hello") {
		t.Fatalf("artifacts text %q", reply)
	}

	// message/stream: submitted, artifact updates, final completed.
	var events []a2a.Event
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "stream me"})}) {
		if err != nil {
			t.Fatalf("message/stream: %v", err)
		}
		events = append(events, ev)
	}
	if len(events) < 3 {
		t.Fatalf("%d events", len(events))
	}
	first, ok := events[0].(*a2a.TaskStatusUpdateEvent)
	if !ok || first.Status.State != a2a.TaskStateSubmitted {
		t.Fatalf("first event %T %+v", events[0], events[0])
	}
	last, ok := events[len(events)-1].(*a2a.TaskStatusUpdateEvent)
	if !ok || !last.Final || last.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("last event %T %+v", events[len(events)-1], events[len(events)-1])
	}
	var streamed string
	for _, ev := range events {
		if au, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
			streamed += textOf(au.Artifact.Parts)
		}
	}
	if !strings.Contains(streamed, "You said: stream me") {
		t.Fatalf("streamed text %q", streamed)
	}

	// tasks/get rebuilds the task from the streams.
	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: last.TaskID})
	if err != nil {
		t.Fatalf("tasks/get: %v", err)
	}
	if got.ID != last.TaskID || got.Status.State != a2a.TaskStateCompleted || len(got.Artifacts) == 0 {
		t.Fatalf("tasks/get %+v", got)
	}

	// tasks/resubscribe replays the finished task.
	var replayed int
	for ev, err := range c.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: last.TaskID}) {
		if err != nil {
			t.Fatalf("tasks/resubscribe: %v", err)
		}
		if su, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && su.Final && su.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("resubscribe final %s", su.Status.State)
		}
		replayed++
	}
	if replayed == 0 {
		t.Fatal("resubscribe replayed nothing")
	}

	// tasks/cancel of a finished task: TaskNotCancelable.
	if _, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: last.TaskID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Fatalf("cancel finished task: %v", err)
	}
	// Unknown task: TaskNotFound.
	if _, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: "no-such-task"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("get unknown task: %v", err)
	}
}

// gatedTurn starts an A2A task on the pool "gated", served by the demo
// agent except that the request whose text is text is held until release
// is called: a running task that can take another message meanwhile,
// without racing a pace. The client it returns speaks to that pool.
func gatedTurn(ctx context.Context, t *testing.T, p *pipeline, text string) (c *a2aclient.Client, task *a2a.Task, release func()) {
	t.Helper()
	gate, held := make(chan struct{}), make(chan struct{}, 1)
	actx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = agent.Run(actx, p.nc, "gated", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
			if demo.Text(env) == text {
				select {
				case held <- struct{}{}:
				default:
				}
				select {
				case <-gate:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return demo.New().Serve(ctx, env, w)
		}), agent.WithMetrics(prometheus.NewRegistry()))
	}()
	release = sync.OnceFunc(func() { close(gate) })
	t.Cleanup(func() { release(); cancel(); <-done })
	c, err := a2aclient.NewFromEndpoints(ctx, []a2a.AgentInterface{{URL: p.url + "/a2a?agent=gated", Transport: a2a.TransportProtocolJSONRPC}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	blocking := false
	res, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text}),
		Config: &a2a.MessageSendConfig{Blocking: &blocking}})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State.Terminal() {
		t.Fatalf("non-blocking send answered %+v", res)
	}
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the agent never received the first turn")
	}
	return c, task, release
}

// TestA2ATaskGetKeepsEveryReply: tasks/get rebuilds every turn of a
// multi-turn task with its text: the last reply in the artifact, earlier
// replies and the reasoning in history; no part list is empty. The second
// turn is sent (non-blocking: it runs after the first) while the agent
// holds the first (a finished task takes no more messages:
// TestA2ATerminalTaskRefused).
func TestA2ATaskGetKeepsEveryReply(t *testing.T) {
	p := startPipeline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, task, release := gatedTurn(ctx, t, p, "first turn")
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "second turn"})
	msg.TaskID, msg.ContextID = task.ID, task.ContextID
	nonBlocking := false
	if _, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: msg, Config: &a2a.MessageSendConfig{Blocking: &nonBlocking}}); err != nil {
		t.Fatal(err)
	}
	release()
	testkit.Eventually(t, 20*time.Second, "the task's end, the first turn's reply in its history", func() bool {
		got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
		if err != nil || !got.Status.State.Terminal() {
			return false
		}
		for _, m := range got.History {
			if strings.Contains(textOf(m.Parts), "You said: first turn") {
				return true
			}
		}
		return false
	})
	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	var reply string
	for _, a := range got.Artifacts {
		if len(a.Parts) == 0 {
			t.Errorf("artifact %s without parts", a.ID)
		}
		reply += textOf(a.Parts)
	}
	if !strings.Contains(reply, "You said: second turn") {
		t.Errorf("artifact text %q", reply)
	}
	var history, thoughts string
	for _, m := range got.History {
		if len(m.Parts) == 0 {
			t.Errorf("history message %s (%s) without parts", m.ID, m.Role)
		}
		history += textOf(m.Parts)
		for _, p := range m.Parts {
			if tp, ok := p.(a2a.TextPart); ok && tp.Metadata["thought"] == true {
				thoughts += tp.Text
			}
		}
	}
	if !strings.Contains(history, "You said: first turn") || !strings.Contains(thoughts, "Thinking about: second turn") {
		t.Errorf("history text %q, thoughts %q", history, thoughts)
	}
}
