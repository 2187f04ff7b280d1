package push_test

import (
	"context"
	"encoding/json"
	"iter"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// artifactsAgent answers "two" with two interleaved text artifacts, A
// (named "Alpha", "a1 a2 a3") and B ("b1 b2"); "ask" with input-required
// and the question "Which city?"; an answer to that task with the two
// artifacts again.
type artifactsAgent struct{}

func (artifactsAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		if ec.StoredTask == nil && up.TextOf(ec.Message.Parts) == "ask" {
			q := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("Which city?"))
			q.TaskID, q.ContextID = ec.TaskID, ec.ContextID
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, q), nil)
			return
		}
		type ch struct {
			id, text       string
			appendTo, last bool
		}
		for i, c := range []ch{{"A", "a1 ", false, false}, {"B", "b1 ", false, false}, {"A", "a2 ", true, false},
			{"B", "b2", true, true}, {"A", "a3", true, true}} {
			ev := a2a.NewArtifactUpdateEvent(ec, a2a.ArtifactID(c.id), a2a.NewTextPart(c.text))
			ev.Append, ev.LastChunk = c.appendTo, c.last
			if i == 0 {
				ev.Artifact.Name = "Alpha"
			}
			if !yield(ev, nil) {
				return
			}
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (artifactsAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// bridgedPool serves artifactsAgent on loopback and bridges pool "agent"
// of a pipeline with push on to it.
func bridgedPool(t *testing.T) *pipetest.Pipeline {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	card := &a2a.AgentCard{Name: "agent", Description: "a test agent", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(base+"/rpc", a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "c", Name: "c", Description: "c", Tags: []string{"test"}}}}
	mux := http.NewServeMux()
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(artifactsAgent{})))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	p := pipetest.Start(t, pipetest.WithPush("127.0.0.1"))
	ctx := context.Background()
	client, err := bridge.NewClient(base)
	if err != nil {
		t.Fatal(err)
	}
	conv, err := bridge.OpenConversations(ctx, p.JS, streams.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ub, err := a2abridge.New(ctx, client, a2abridge.WithConversations("agent", conv), a2abridge.WithPollInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ub.Close() })
	h, err := bridge.New("agent", ub, bridge.WithRetry(2, 5*time.Millisecond, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	p.Pool("agent", h)
	return p
}

// pushedArtifact is an artifact as a webhook's v1.0 updates build it.
type pushedArtifact struct {
	id, name, text string
	updates        int
}

// v1Pushed replays the v1.0 deliveries ds (each event id once) as a
// client applies artifact-updates: the artifacts in the order first seen,
// and the states of the status updates with their messages' text.
func v1Pushed(t *testing.T, ds []pushtest.Delivery) (arts []*pushedArtifact, states []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, d := range ds {
		if seen[d.EventID] {
			continue
		}
		seen[d.EventID] = true
		var sr a2a.StreamResponse
		if err := json.Unmarshal(d.Body, &sr); err != nil {
			t.Fatalf("v1.0 body %s: %v", d.Body, err)
		}
		switch e := sr.Event.(type) {
		case *a2a.TaskArtifactUpdateEvent:
			var a *pushedArtifact
			for _, x := range arts {
				if x.id == string(e.Artifact.ID) {
					a = x
				}
			}
			if a == nil {
				a = &pushedArtifact{id: string(e.Artifact.ID)}
				arts = append(arts, a)
			}
			if !e.Append {
				a.text, a.name = "", e.Artifact.Name
			}
			a.text += up.TextOf(e.Artifact.Parts)
			a.updates++
		case *a2a.TaskStatusUpdateEvent:
			s := string(e.Status.State)
			if e.Status.Message != nil {
				s += " " + up.TextOf(e.Status.Message.Parts)
			}
			states = append(states, s)
		}
	}
	return arts, states
}

// describe is arts as "id(name)=text" joined.
func describe(arts []*pushedArtifact) string {
	var b []string
	for _, a := range arts {
		b = append(b, a.id+"("+a.name+")="+a.text)
	}
	return strings.Join(b, " ")
}

// describeV1 is a task's artifacts as describe writes them.
func describeV1(arts []*a2a.Artifact) string {
	var b []string
	for _, a := range arts {
		b = append(b, string(a.ID)+"("+a.Name+")="+up.TextOf(a.Parts))
	}
	return strings.Join(b, " ")
}

// TestPushBridgedArtifacts: a bridged A2A agent streams two
// interleaved text artifacts (A named "Alpha"). A v1.0 webhook gets the
// artifacts GetTask shows, in its order, named as it names them, and one
// completed status; an interrupted turn then its answer: the webhook gets
// input-required once with the question, then the answer's artifacts and
// completed. A v0.3 webhook's last Task holds the artifacts tasks/get
// shows.
func TestPushBridgedArtifacts(t *testing.T) {
	p := bridgedPool(t)
	r := pushtest.NewReceiver(t)
	c := up.Client(t, p.URL+"/pools/agent")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	send := func(t *testing.T, text, path string, task *a2a.Task) *a2a.Task {
		t.Helper()
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
		req := &a2a.SendMessageRequest{Message: msg}
		if task != nil {
			msg.TaskID, msg.ContextID = task.ID, task.ContextID
		} else {
			req.Config = &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: r.URL + path, Token: "tok"}}
		}
		res, err := c.SendMessage(ctx, req)
		if err != nil {
			t.Fatalf("SendMessage %q: %v", text, err)
		}
		got, ok := res.(*a2a.Task)
		if !ok {
			t.Fatalf("SendMessage %q answered %T", text, res)
		}
		return got
	}
	getTask := func(t *testing.T, id a2a.TaskID) *a2a.Task {
		t.Helper()
		task, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		return task
	}
	const want = "A(Alpha)=a1 a2 a3 B()=b1 b2"

	t.Run("v1.0 interleaved", func(t *testing.T) {
		task := send(t, "two", "/v1/two", nil)
		arts, states := v1Pushed(t, r.Await(t, 30*time.Second, "/v1/two", "TASK_STATE_COMPLETED"))
		if got := describeV1(getTask(t, task.ID).Artifacts); got != want {
			t.Errorf("GetTask's artifacts %s, want %s", got, want)
		}
		if got := describe(arts); got != want {
			t.Errorf("the webhook's artifacts %s, want %s (GetTask's)", got, want)
		}
		if n := strings.Count(strings.Join(states, "|"), "TASK_STATE_COMPLETED"); n != 1 {
			t.Errorf("statuses %v: %d completed, want 1", states, n)
		}
	})

	t.Run("v1.0 interrupted then answered", func(t *testing.T) {
		task := send(t, "ask", "/v1/ask", nil)
		if task.Status.State != a2a.TaskStateInputRequired {
			t.Fatalf("first turn %s, want input-required", task.Status.State)
		}
		r.Await(t, 30*time.Second, "/v1/ask", "TASK_STATE_INPUT_REQUIRED")
		send(t, "Paris", "", task)
		arts, states := v1Pushed(t, r.Await(t, 30*time.Second, "/v1/ask", "TASK_STATE_COMPLETED"))
		asked := 0
		for _, s := range states {
			if strings.HasPrefix(s, "TASK_STATE_INPUT_REQUIRED") {
				asked++
				if s != "TASK_STATE_INPUT_REQUIRED Which city?" {
					t.Errorf("input-required update %q, want the question", s)
				}
			}
		}
		if asked != 1 {
			t.Errorf("statuses %v: %d input-required, want 1", states, asked)
		}
		if got := describeV1(getTask(t, task.ID).Artifacts); got != want {
			t.Errorf("GetTask's artifacts %s, want %s", got, want)
		}
		if got := describe(arts); got != want {
			t.Errorf("the webhook's artifacts %s, want %s", got, want)
		}
	})

	t.Run("v0.3 interleaved", func(t *testing.T) {
		old := v03Client(t, p, "agent")
		res, err := old.SendMessage(ctx, &a2a03.MessageSendParams{
			Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "two"}),
			Config:  &a2a03.MessageSendConfig{PushConfig: &a2a03.PushConfig{URL: r.URL + "/v03/two", Token: "tok"}}})
		if err != nil {
			t.Fatal(err)
		}
		task, ok := res.(*a2a03.Task)
		if !ok {
			t.Fatalf("message/send answered %T", res)
		}
		ds := r.Await(t, 30*time.Second, "/v03/two", string(a2a03.TaskStateCompleted))
		var last a2a03.Task
		if err := json.Unmarshal(ds[len(ds)-1].Body, &last); err != nil {
			t.Fatal(err)
		}
		got, err := old.GetTask(ctx, &a2a03.TaskQueryParams{ID: task.ID})
		if err != nil {
			t.Fatal(err)
		}
		d03 := func(arts []*a2a03.Artifact) string {
			var b []string
			for _, a := range arts {
				b = append(b, string(a.ID)+"("+a.Name+")="+text03(a.Parts))
			}
			return strings.Join(b, " ")
		}
		if g := d03(got.Artifacts); g != want {
			t.Errorf("tasks/get's artifacts %s, want %s", g, want)
		}
		if g := d03(last.Artifacts); g != want {
			t.Errorf("the webhook's last Task's artifacts %s, want %s", g, want)
		}
		// The interrupted turn, then its answer.
		res, err = old.SendMessage(ctx, &a2a03.MessageSendParams{
			Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "ask"}),
			Config:  &a2a03.MessageSendConfig{PushConfig: &a2a03.PushConfig{URL: r.URL + "/v03/ask", Token: "tok"}}})
		if err != nil {
			t.Fatal(err)
		}
		if task, ok = res.(*a2a03.Task); !ok || task.Status.State != a2a03.TaskStateInputRequired {
			t.Fatalf("message/send answered %+v, want input-required", res)
		}
		r.Await(t, 30*time.Second, "/v03/ask", string(a2a03.TaskStateInputRequired))
		m := a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "Paris"})
		m.TaskID, m.ContextID = task.ID, task.ContextID
		if _, err := old.SendMessage(ctx, &a2a03.MessageSendParams{Message: m}); err != nil {
			t.Fatal(err)
		}
		ds = r.Await(t, 30*time.Second, "/v03/ask", string(a2a03.TaskStateCompleted))
		if err := json.Unmarshal(ds[len(ds)-1].Body, &last); err != nil {
			t.Fatal(err)
		}
		if got, err = old.GetTask(ctx, &a2a03.TaskQueryParams{ID: task.ID}); err != nil {
			t.Fatal(err)
		}
		if g := d03(got.Artifacts); g != want || d03(last.Artifacts) != g {
			t.Errorf("answered: tasks/get's artifacts %s, the webhook's last Task's %s, want %s", g, d03(last.Artifacts), want)
		}
		if a, b := len(got.History), len(last.History); a != b {
			t.Errorf("answered: tasks/get's history has %d messages, the webhook's last Task %d", a, b)
		}
		asked := 0
		for _, d := range r.Of("/v03/ask") {
			if d.State == string(a2a03.TaskStateInputRequired) {
				asked++
			}
		}
		if asked < 1 {
			t.Errorf("no input-required Task delivered")
		}
	})
}
