package jsupstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	js "github.com/e2a-pipeline/pipeline/internal/jsupstream"
)

type variant struct{ v03, stream bool }

func (v variant) String() string {
	s := "v1.0"
	if v.v03 {
		s = "v0.3"
	}
	if !v.stream {
		s += "/no-streaming"
	}
	return s
}

var variants = []variant{{false, true}, {false, false}, {true, true}, {true, false}}

// server starts one node server for the variant (startup is the slow
// part: the tests share one per variant).
func (v variant) server(t *testing.T) (*js.Server, *a2aclient.Client) {
	t.Helper()
	s := js.Start(t, js.Options{V03: v.v03, NoStreaming: !v.stream, SlowInterval: 5 * time.Millisecond})
	return s, connect(t, s.BaseURL(), v.v03)
}

func connect(t *testing.T, base string, v03 bool) *a2aclient.Client {
	t.Helper()
	ctx := context.Background()
	resolver := agentcard.DefaultResolver
	if v03 {
		resolver = &agentcard.Resolver{CardParser: a2av0.NewAgentCardParser()}
	}
	card, err := resolver.Resolve(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

func msg(text string) *a2a.SendMessageRequest {
	return &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))}
}

func reply(task a2a.TaskInfoProvider, text string) *a2a.SendMessageRequest {
	return &a2a.SendMessageRequest{Message: a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart(text))}
}

func stream(t *testing.T, events func(func(a2a.Event, error) bool), stop func(*up.Turn) bool) *up.Turn {
	t.Helper()
	v := up.NewTurn()
	for ev, err := range events {
		if err != nil {
			t.Fatalf("after %d events: %v", v.Events, err)
		}
		v.Add(ev)
		if stop != nil && stop(v) {
			break
		}
	}
	return v
}

func send(t *testing.T, c *a2aclient.Client, req *a2a.SendMessageRequest) *up.Turn {
	t.Helper()
	res, err := c.SendMessage(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	v := up.NewTurn()
	v.Add(res)
	return v
}

func record(t *testing.T, s *js.Server) js.Record {
	t.Helper()
	r, err := s.Record(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestJSUpstream: @a2a-js/sdk's server, driven by a2a-go/v2's client from
// its card, v1.0 and v0.3, with and without streaming: every single-turn
// scenario's exact content (streamed event by event, and as SendMessage's
// task), ask and auth continued on the same task, slow canceled.
func TestJSUpstream(t *testing.T) {
	for _, vr := range variants {
		t.Run(vr.String(), func(t *testing.T) {
			s, c := vr.server(t)
			for _, how := range []string{"stream", "send"} {
				for _, text := range []string{"stream: some body", "tool: some body", "fail: some body", "message: some body", "file: some body", "just words"} {
					t.Run(how+"/"+text, func(t *testing.T) {
						var v *up.Turn
						if how == "stream" {
							v = stream(t, c.SendStreamingMessage(context.Background(), msg(text)), nil)
						} else {
							v = send(t, c, msg(text))
						}
						if err := v.Check(text, how == "stream" && vr.stream); err != nil {
							t.Error(err)
						}
					})
				}
			}
			t.Run("ask", func(t *testing.T) { ask(t, s, c, vr.stream) })
			t.Run("auth", func(t *testing.T) { auth(t, s, c, vr.stream) })
			t.Run("slow", func(t *testing.T) { slow(t, s, c, vr.stream) })
			if vr.stream {
				t.Run("resubscribe", func(t *testing.T) { resubscribe(t, c) })
			}
		})
	}
}

func ask(t *testing.T, s *js.Server, c *a2aclient.Client, streaming bool) {
	first := stream(t, c.SendStreamingMessage(context.Background(), msg("ask: hi")), nil)
	if first.State() != a2a.TaskStateInputRequired || first.Status != up.AskQuestion {
		t.Fatalf("first turn: states %v, status %q", first.States, first.Status)
	}
	second := stream(t, c.SendStreamingMessage(context.Background(), reply(first.Task, "Ada")), nil)
	if second.State() != a2a.TaskStateCompleted || second.Text(up.ReplyArtifact) != up.AskReply("Ada") || streaming && second.States[0] != a2a.TaskStateWorking {
		t.Fatalf("second turn: states %v (want working … completed), reply %q", second.States, second.Text(up.ReplyArtifact))
	}
	r := record(t, s)
	last, call := r.Executions[len(r.Executions)-1], r.Calls[len(r.Calls)-1]
	if last.Scenario != up.Answer || !last.Continued || last.TaskID != string(first.Task.TaskID) ||
		len(last.History) < 2 || last.History[0] != "ask: hi" || last.History[len(last.History)-1] != "Ada" {
		t.Errorf("agent's second turn %+v", last)
	}
	if call.TaskID != string(first.Task.TaskID) || call.ContextID != first.Task.ContextID {
		t.Errorf("second call %+v, want task %s context %s", call, first.Task.TaskID, first.Task.ContextID)
	}
}

func auth(t *testing.T, s *js.Server, c *a2aclient.Client, streaming bool) {
	ctx, cancel := context.WithCancel(context.Background())
	atAuth := func(v *up.Turn) bool { return v.State() == a2a.TaskStateAuthRequired }
	first := stream(t, c.SendStreamingMessage(ctx, msg("auth: please")), atAuth)
	cancel()
	if first.State() != a2a.TaskStateAuthRequired || first.Status != up.AuthPrompt {
		t.Fatalf("first turn: states %v, status %q", first.States, first.Status)
	}
	var second *up.Turn
	if streaming {
		second = stream(t, c.SendStreamingMessage(context.Background(), reply(first.Task, "token-1")), nil)
	} else {
		second = send(t, c, reply(first.Task, "token-1"))
	}
	if second.State() != a2a.TaskStateCompleted || second.Text(up.ReplyArtifact) != up.AuthReply("token-1") || streaming && second.States[0] != a2a.TaskStateWorking {
		t.Fatalf("second turn: states %v, reply %q", second.States, second.Text(up.ReplyArtifact))
	}
	r := record(t, s)
	if last := r.Executions[len(r.Executions)-1]; last.Scenario != up.Authed || last.TaskID != string(first.Task.TaskID) || last.Text != "token-1" {
		t.Errorf("agent's second turn %+v", last)
	}
}

func slow(t *testing.T, s *js.Server, c *a2aclient.Client, streaming bool) {
	ctx := context.Background()
	var id a2a.TaskID
	if streaming {
		v := stream(t, c.SendStreamingMessage(ctx, msg("slow: x")), func(v *up.Turn) bool { return v.Chunks[up.SlowArtifact] == 3 })
		id = v.Task.TaskID
		if got := v.Text(up.SlowArtifact); got != up.SlowChunk(1)+up.SlowChunk(2)+up.SlowChunk(3) {
			t.Errorf("slow chunks %q", got)
		}
	} else {
		req := msg("slow: x")
		req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
		res, err := c.SendMessage(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		id = res.TaskInfo().TaskID
	}
	task, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
	if err != nil || task.Status.State != a2a.TaskStateCanceled || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask answered %s, GetTask then %v, %v", task.Status.State, got, err)
	}
	if r := record(t, s); len(r.Cancels) != 1 || r.Cancels[0] != string(id) {
		t.Errorf("cancels %v, want [%s]", r.Cancels, id)
	}
}

// resubscribe: a client that drops a "slow:" stream gets the task back
// with SubscribeToTask, every chunk once, and its end once canceled.
func resubscribe(t *testing.T, c *a2aclient.Client) {
	ctx, drop := context.WithCancel(context.Background())
	first := stream(t, c.SendStreamingMessage(ctx, msg("slow: x")), func(v *up.Turn) bool { return v.Chunks[up.SlowArtifact] == 2 })
	drop()
	id := first.Task.TaskID
	canceled := false
	again := stream(t, c.SubscribeToTask(context.Background(), &a2a.SubscribeToTaskRequest{ID: id}), func(v *up.Turn) bool {
		if v.Chunks[up.SlowArtifact] == 2 && !canceled {
			canceled = true
			if _, err := c.CancelTask(context.Background(), &a2a.CancelTaskRequest{ID: id}); err != nil {
				t.Error(err)
			}
		}
		return false
	})
	got := again.Text(up.SlowArtifact)
	if again.State() != a2a.TaskStateCanceled || got != slowText(strings.Count(got, "tick")) || strings.Count(got, "tick") < 4 {
		t.Errorf("subscription: states %v, slow text %q; want … canceled and every chunk once from the first", again.States, got)
	}
}

func slowText(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(up.SlowChunk(i))
	}
	return b.String()
}

// TestJSBearer: with a bearer token required, the card declares the
// scheme and requirement as @a2a-js/sdk writes them (proto JSON:
// "schemes": {"bearer": {}}), which a2a-go/v2 v2.4.0's card parser
// refuses (it reads the scopes as a JSON array): a client of such an
// agent must read its card tolerantly. A call without the token is
// refused (HTTP 401) and recorded as refused; with it, served.
func TestJSBearer(t *testing.T) {
	s := js.Start(t, js.Options{Bearer: "s3cret"})
	ctx := context.Background()
	_, err := agentcard.DefaultResolver.Resolve(ctx, s.BaseURL())
	if err == nil || !strings.Contains(err.Error(), "securityRequirements") {
		t.Errorf("a2a-go/v2 read the SDK's security requirements (%v): the interop gap this test documents is gone", err)
	}
	c, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{a2a.NewAgentInterface(s.InterfaceURL(), a2a.TransportProtocolJSONRPC)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	if _, err := c.SendMessage(ctx, msg("hi")); err == nil {
		t.Fatal("a call without the token was served")
	}
	ctx = a2aclient.AttachServiceParams(ctx, a2aclient.ServiceParams{"authorization": {"Bearer s3cret"}})
	if _, err := c.SendMessage(ctx, msg("hi")); err != nil {
		t.Fatal(err)
	}
	r := record(t, s)
	if len(r.Calls) != 2 || !r.Calls[0].Refused || r.Calls[1].Refused || r.Calls[1].Headers["authorization"] != "Bearer s3cret" {
		t.Errorf("calls %+v", r.Calls)
	}
}

func TestJSOptionsRefused(t *testing.T) {
	if _, err := js.New(js.Options{SlowChunks: -1}); !errors.Is(err, js.ErrInvalidOption) {
		t.Errorf("New: %v, want %v", err, js.ErrInvalidOption)
	}
}
