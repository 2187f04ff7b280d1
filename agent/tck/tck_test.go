package tck_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2aclient03 "github.com/a2aproject/a2a-go/a2aclient"
	agentcard03 "github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/tck"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// start runs the pipeline with gRPC, tck as the default pool (as
// `E2A_DEFAULT_POOL=tck e2a dev` for the TCK), the TCK agent serving it.
// seen, when not nil, receives every envelope the agent is called with.
func start(t *testing.T, seen chan<- *e2a.Envelope) *pipetest.Pipeline {
	t.Helper()
	p := pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithIngress(ingress.WithDefaultPool(tck.Pool)))
	h, err := tck.New(tck.WithLongWait(300 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if seen == nil {
		p.Pool(tck.Pool, h)
		return p
	}
	p.Pool(tck.Pool, agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		seen <- env
		return h.Serve(ctx, env, w)
	}))
	return p
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var bindings = []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC}

// client is a2a-go/v2's client over binding b, from the pipeline's root
// card (the card the TCK reads).
func client(t *testing.T, p *pipetest.Pipeline, b a2a.TransportProtocol) *a2aclient.Client {
	t.Helper()
	return a2aupstream.Client(t, p.URL, a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{b}}),
		a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
}

func send(messageID string) *a2a.SendMessageRequest {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("TCK test"))
	msg.ID = messageID
	return &a2a.SendMessageRequest{Message: msg}
}

// answer is what a client saw of one turn: the task states in order, the
// artifacts (parts appended as the events say), the status message's text,
// a direct message, and the artifact updates' append and lastChunk flags.
type answer struct {
	states    []a2a.TaskState
	artifacts []*a2a.Artifact
	status    string
	message   *a2a.Message
	flags     []string
	events    int
}

func (a *answer) artifact(id a2a.ArtifactID) *a2a.Artifact {
	for _, art := range a.artifacts {
		if art.ID == id {
			return art
		}
	}
	return nil
}

func (a *answer) add(ev a2a.Event) {
	a.events++
	switch e := ev.(type) {
	case *a2a.Task:
		a.states = append(a.states, e.Status.State)
		a.artifacts = append(a.artifacts, e.Artifacts...)
		a.status = text(e.Status.Message)
	case *a2a.Message:
		a.message = e
	case *a2a.TaskStatusUpdateEvent:
		a.states = append(a.states, e.Status.State)
		if e.Status.Message != nil {
			a.status = text(e.Status.Message)
		}
	case *a2a.TaskArtifactUpdateEvent:
		a.flags = append(a.flags, flag(e.Append, "append")+flag(e.LastChunk, "last"))
		if art := a.artifact(e.Artifact.ID); art != nil && e.Append {
			art.Parts = append(art.Parts, e.Artifact.Parts...)
			return
		}
		c := *e.Artifact
		a.artifacts = append(a.artifacts, &c)
	}
}

func flag(on bool, s string) string {
	if on {
		return s + " "
	}
	return ""
}

func text(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range m.Parts {
		b.WriteString(p.Text())
	}
	return b.String()
}

func (a *answer) last() a2a.TaskState {
	if len(a.states) == 0 {
		return ""
	}
	return a.states[len(a.states)-1]
}

// onePart is the one part of the one artifact.
func (a *answer) onePart(t *testing.T) *a2a.Part {
	t.Helper()
	if len(a.artifacts) != 1 || len(a.artifacts[0].Parts) != 1 || a.artifacts[0].ID == "" {
		t.Fatalf("artifacts %+v, want one with one part", a.artifacts)
	}
	return a.artifacts[0].Parts[0]
}

// ask sends messageID as SendMessage (stream false) or
// SendStreamingMessage and folds what comes back.
func ask(t *testing.T, c *a2aclient.Client, messageID string, stream bool) *answer {
	t.Helper()
	ctx := testCtx(t)
	a := &answer{}
	if !stream {
		res, err := c.SendMessage(ctx, send(messageID))
		if err != nil {
			t.Fatal(err)
		}
		a.add(res)
		return a
	}
	for ev, err := range c.SendStreamingMessage(ctx, send(messageID)) {
		if err != nil {
			t.Fatal(err)
		}
		a.add(ev)
	}
	return a
}

// order checks that states never go back (submitted, then working or
// interrupted, then terminal) and end in want.
func order(t *testing.T, a *answer, want a2a.TaskState) {
	t.Helper()
	rank := func(s a2a.TaskState) int {
		switch {
		case s == a2a.TaskStateSubmitted:
			return 0
		case s.Terminal():
			return 2
		}
		return 1
	}
	for i := 1; i < len(a.states); i++ {
		if rank(a.states[i]) < rank(a.states[i-1]) {
			t.Errorf("states %v go back", a.states)
		}
	}
	if a.last() != want {
		t.Errorf("states %v, want the last %s", a.states, want)
	}
}

func textArtifact(want string) func(*testing.T, *answer) {
	return func(t *testing.T, a *answer) {
		order(t, a, a2a.TaskStateCompleted)
		if got := a.onePart(t).Text(); got != want {
			t.Errorf("artifact text %q, want %q", got, want)
		}
	}
}

func fileArtifact(t *testing.T, a *answer) {
	order(t, a, a2a.TaskStateCompleted)
	p := a.onePart(t)
	if string(p.Raw()) != tck.FileBytes || p.Filename != tck.FileName || p.MediaType != tck.FileMIME {
		t.Errorf("file part %+v (raw %q)", p, p.Raw())
	}
}

// streamed checks a streaming scenario's lifecycle: submitted, working,
// its artifact, completed.
func streamed(want string) func(*testing.T, *answer) {
	return func(t *testing.T, a *answer) {
		textArtifact(want)(t, a)
		if len(a.states) < 3 || a.states[0] != a2a.TaskStateSubmitted || a.states[1] != a2a.TaskStateWorking {
			t.Errorf("states %v, want submitted, working, ..., completed", a.states)
		}
	}
}

// scenarios are the pinned suite's scenarios/*.feature, each checked on
// what the client gets.
var scenarios = []struct {
	prefix string
	stream bool
	check  func(*testing.T, *answer)
}{
	{tck.CompleteTask, false, func(t *testing.T, a *answer) {
		order(t, a, a2a.TaskStateCompleted)
		if a.status != "Hello from TCK" {
			t.Errorf("status message %q", a.status)
		}
	}},
	{tck.ArtifactText, false, textArtifact("Generated text content")},
	{tck.ArtifactFile, false, fileArtifact},
	{tck.ArtifactFileURL, false, func(t *testing.T, a *answer) {
		order(t, a, a2a.TaskStateCompleted)
		p := a.onePart(t)
		if p.URL() != tck.FileURL || p.Filename != tck.FileName || p.MediaType != tck.FileMIME {
			t.Errorf("file url part %+v", p)
		}
	}},
	{tck.ArtifactData, false, func(t *testing.T, a *answer) {
		order(t, a, a2a.TaskStateCompleted)
		if got := a.onePart(t).Data(); !reflect.DeepEqual(got, map[string]any{"key": "value", "count": float64(42)}) {
			t.Errorf("data %#v", got)
		}
	}},
	{tck.MessageResponse, false, directMessage},
	{tck.MessageResponse, true, directMessage},
	{tck.InputRequired, false, func(t *testing.T, a *answer) { order(t, a, a2a.TaskStateInputRequired) }},
	{tck.RejectTask, false, func(t *testing.T, a *answer) {
		order(t, a, a2a.TaskStateRejected)
		if a.status != "rejected" {
			t.Errorf("status message %q", a.status)
		}
	}},
	{tck.Stream001, true, streamed("Stream hello from TCK")},
	{tck.Stream002, true, func(t *testing.T, a *answer) {
		order(t, a, a2a.TaskStateCompleted)
		if len(a.artifacts) != 0 {
			t.Errorf("artifacts %+v", a.artifacts)
		}
	}},
	{tck.Stream003, true, streamed("Stream task lifecycle")},
	{tck.StreamOrdering001, true, streamed("Ordered output")},
	{tck.StreamArtifactText, true, streamed("Streamed text content")},
	{tck.StreamArtifactFile, true, fileArtifact},
	{tck.StreamArtifactChunked, true, func(t *testing.T, a *answer) {
		order(t, a, a2a.TaskStateCompleted)
		if len(a.artifacts) != 1 || len(a.artifacts[0].Parts) != 2 ||
			a.artifacts[0].Parts[0].Text()+a.artifacts[0].Parts[1].Text() != "chunk-1 chunk-2" {
			t.Errorf("artifacts %+v, want one of chunk-1 and chunk-2", a.artifacts)
		}
		if !reflect.DeepEqual(a.flags, []string{"", "append last "}) {
			t.Errorf("artifact updates %q, want the first alone, the second appended and last", a.flags)
		}
	}},
	{tck.ResubscribeLongRunning, true, func(t *testing.T, a *answer) {
		order(t, a, a2a.TaskStateCompleted)
		if len(a.states) != 3 || a.states[1] != a2a.TaskStateWorking {
			t.Errorf("states %v, want submitted, working, completed", a.states)
		}
	}},
	{"tck-something-else", false, func(t *testing.T, a *answer) {
		order(t, a, a2a.TaskStateCompleted)
		if !strings.HasPrefix(a.status, "Unhandled messageId prefix: tck-something-else-") {
			t.Errorf("status message %q", a.status)
		}
	}},
}

// directMessage: the answer is a Message, not a Task (DM-MSG-001): over
// streaming the one event.
func directMessage(t *testing.T, a *answer) {
	if a.message == nil || a.events != 1 || len(a.states) != 0 {
		t.Fatalf("%d events, states %v, message %+v: want one Message", a.events, a.states, a.message)
	}
	m := a.message
	if text(m) != "Direct message response" || m.Role != a2a.MessageRoleAgent || m.ID == "" || m.ContextID == "" || m.TaskID != "" {
		t.Errorf("message %+v", m)
	}
}

// TestScenarios runs every scenario of the pinned TCK suite through
// a2a-go/v2's client on the three bindings of the pipeline's root card.
func TestScenarios(t *testing.T) {
	p := start(t, nil)
	for _, b := range bindings {
		c := client(t, p, b)
		for i, sc := range scenarios {
			mode := "send"
			if sc.stream {
				mode = "stream"
			}
			t.Run(string(b)+"/"+sc.prefix+"/"+mode, func(t *testing.T) {
				sc.check(t, ask(t, c, sc.prefix+"-"+string(b)+"-"+string(rune('a'+i)), sc.stream))
			})
		}
	}
}

// TestMessageAnswerV03: a2a-go's v0.3 client gets the direct answer as a
// message (result kind "message"), on message/send, and on message/stream
// as the stream's one event.
func TestMessageAnswerV03(t *testing.T) {
	p := start(t, nil)
	ctx := testCtx(t)
	card, err := agentcard03.DefaultResolver.Resolve(ctx, p.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient03.NewFromCard(ctx, card)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	params := func(id string) *a2a03.MessageSendParams {
		msg := a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "TCK test"})
		msg.ID = id
		return &a2a03.MessageSendParams{Message: msg}
	}
	check := func(res any) {
		t.Helper()
		m, ok := res.(*a2a03.Message)
		if !ok {
			t.Fatalf("result %T, want a message", res)
		}
		if len(m.Parts) != 1 || m.Parts[0].(a2a03.TextPart).Text != "Direct message response" || m.Role != a2a03.MessageRoleAgent || m.ID == "" {
			t.Errorf("message %+v", m)
		}
	}
	res, err := c.SendMessage(ctx, params(tck.MessageResponse+"-v03-send"))
	if err != nil {
		t.Fatal(err)
	}
	check(res)
	var evs []a2a03.Event
	for ev, err := range c.SendStreamingMessage(ctx, params(tck.MessageResponse+"-v03-stream")) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if len(evs) != 1 {
		t.Fatalf("message/stream: %d events, want the message alone", len(evs))
	}
	check(evs[0])
}

// TestCancelInterrupted: CancelTask on an input-required task (the TCK's
// CORE-CANCEL-001 setup) answers it canceled on every binding; GetTask
// agrees, the task takes no further message, a second cancel is
// TaskNotCancelable, and the agent was never called for the cancel.
func TestCancelInterrupted(t *testing.T) {
	seen := make(chan *e2a.Envelope, 64)
	p := start(t, seen)
	for _, b := range bindings {
		t.Run(string(b), func(t *testing.T) {
			ctx := testCtx(t)
			c := client(t, p, b)
			res, err := c.SendMessage(ctx, send(tck.InputRequired+"-cancel-"+string(b)))
			if err != nil {
				t.Fatal(err)
			}
			task, ok := res.(*a2a.Task)
			if !ok || task.Status.State != a2a.TaskStateInputRequired {
				t.Fatalf("result %+v, want an input-required task", res)
			}
			got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != task.ID || got.Status.State != a2a.TaskStateCanceled {
				t.Fatalf("cancel answered %s %s", got.ID, got.Status.State)
			}
			if g, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID}); err != nil || g.Status.State != a2a.TaskStateCanceled {
				t.Errorf("GetTask: %+v %v", g, err)
			}
			if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
				t.Errorf("second cancel: %v, want TaskNotCancelable", err)
			}
			next := send(tck.CompleteTask + "-after-cancel-" + string(b))
			next.Message.TaskID = task.ID
			if _, err := c.SendMessage(ctx, next); err == nil {
				t.Error("a message to the canceled task was accepted")
			}
		})
	}
	close(seen)
	n := 0
	for env := range seen {
		n++
		if !strings.HasPrefix(env.MessageID, tck.InputRequired) {
			t.Errorf("the agent was called with %s %q", env.Method, env.MessageID)
		}
	}
	if n != len(bindings) {
		t.Errorf("the agent was called %d times, want %d", n, len(bindings))
	}
}

// TestSubscribeFollowsTheAnswer: SubscribeToTask on an input-required
// task (the TCK's STREAM-SUB-002) answers the task, then, once the
// client's answer starts the next turn, that turn's events to the
// terminal state, where the stream ends; on every binding.
func TestSubscribeFollowsTheAnswer(t *testing.T) {
	p := start(t, nil)
	for _, b := range bindings {
		t.Run(string(b), func(t *testing.T) {
			ctx := testCtx(t)
			c := client(t, p, b)
			res, err := c.SendMessage(ctx, send(tck.InputRequired+"-sub-"+string(b)))
			if err != nil {
				t.Fatal(err)
			}
			task, ok := res.(*a2a.Task)
			if !ok || task.Status.State != a2a.TaskStateInputRequired {
				t.Fatalf("result %+v, want an input-required task", res)
			}
			a := &answer{}
			answered := false
			for ev, err := range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
				if err != nil {
					t.Fatal(err)
				}
				a.add(ev)
				if !answered {
					// The task as it stands came: answer it.
					answered = true
					next := send(tck.CompleteTask + "-sub-" + string(b))
					next.Message.TaskID = task.ID
					if _, err := c.SendMessage(ctx, next); err != nil {
						t.Fatal(err)
					}
				}
			}
			if len(a.states) < 2 || a.states[0] != a2a.TaskStateInputRequired || a.last() != a2a.TaskStateCompleted {
				t.Errorf("states %v, want input-required first and completed last", a.states)
			}
			if a.status != "Hello from TCK" {
				t.Errorf("status message %q", a.status)
			}
		})
	}
}

// TestScenarioPrefix: the longest prefix wins (tck-artifact-file-url over
// tck-artifact-file, tck-stream-artifact-file over nothing shorter), and
// an id with none is the default.
func TestScenarioPrefix(t *testing.T) {
	for id, want := range map[string]string{
		"tck-artifact-file-url-1a2b":       tck.ArtifactFileURL,
		"tck-artifact-file-1a2b":           tck.ArtifactFile,
		"tck-stream-artifact-file-1a2b":    tck.StreamArtifactFile,
		"tck-stream-artifact-chunked-1a2b": tck.StreamArtifactChunked,
		"tck-stream-ordering-001-1a2b":     tck.StreamOrdering001,
		"test-resubscribe-message-id-1":    tck.ResubscribeLongRunning,
		"tck-send-003-1a2b":                "",
		"":                                 "",
	} {
		if got := tck.Scenario(id); got != want {
			t.Errorf("%q: %q, want %q", id, got, want)
		}
	}
}

// TestOptions: a long wait that is not positive is refused with
// ErrInvalidOption, which is agent.ErrInvalidOption.
func TestOptions(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := tck.New(tck.WithLongWait(d)); !errors.Is(err, tck.ErrInvalidOption) || !errors.Is(err, agent.ErrInvalidOption) {
			t.Errorf("%v: %v", d, err)
		}
	}
}
