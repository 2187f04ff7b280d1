package a2aupstream_test

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
	grpcv0 "github.com/a2aproject/a2a-go/v2/a2agrpc/v0"
	grpcv1 "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
)

// variant is one kind of server the tests run every scenario against.
type variant struct {
	binding     a2a.TransportProtocol
	v03, stream bool
}

func (v variant) String() string {
	s := string(v.binding)
	if v.v03 {
		s += "/v0.3"
	}
	if !v.stream {
		s += "/no-streaming"
	}
	return s
}

func variants() []variant {
	var out []variant
	for _, b := range []a2a.TransportProtocol{up.JSONRPC, up.HTTPJSON, up.GRPC} {
		for _, v03 := range []bool{false, true} {
			for _, stream := range []bool{true, false} {
				out = append(out, variant{b, v03, stream})
			}
		}
	}
	return out
}

func (v variant) start(t *testing.T, o up.Options) *up.Server {
	o.Binding, o.V03, o.NoStreaming = v.binding, v.v03, !v.stream
	o.SlowInterval = 5 * time.Millisecond
	return up.Start(t, o)
}

// connect resolves the server's card as a client would (the v0.3 parser
// for a v0.3 card) and builds a2a-go/v2's client from it.
func connect(t *testing.T, s *up.Server, v03 bool) *a2aclient.Client {
	t.Helper()
	ctx := context.Background()
	resolver := agentcard.DefaultResolver
	if v03 {
		resolver = &agentcard.Resolver{CardParser: a2av0.NewAgentCardParser()}
	}
	card, err := resolver.Resolve(ctx, s.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	creds := grpc.WithTransportCredentials(insecure.NewCredentials())
	c, err := a2aclient.NewFromCard(ctx, card,
		grpcv1.WithGRPCTransport(creds), grpcv0.WithGRPCTransport(creds),
		a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{}), a2av0.WithRESTTransport(a2av0.RESTTransportConfig{}))
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

// stream runs a streaming call to its end; stop, when set, ends reading
// early (the turn so far is returned).
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

// TestScenarios: every scenario's exact content reaches a2a-go/v2's client
// over every binding, v1.0 and v0.3, streaming (event by event: chunks,
// lastChunk, the thought mark) and with SendMessage (the final task).
func TestScenarios(t *testing.T) {
	for _, vr := range variants() {
		t.Run(vr.String(), func(t *testing.T) {
			s := vr.start(t, up.Options{})
			c := connect(t, s, vr.v03)
			for _, how := range []string{"stream", "send"} {
				for _, sc := range []string{up.Stream, up.Tool, up.Fail, up.Message, up.File, up.Echo} {
					t.Run(how+"/"+sc, func(t *testing.T) {
						text := sc + ": some body"
						if sc == up.Echo {
							text = "just words"
						}
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
		})
	}
}

// TestAskContinues: "ask:" stops in input-required with the question; the
// answer, sent on the same task and context, completes it, and the agent
// ran the second turn on the stored task with the first message in its
// history.
func TestAskContinues(t *testing.T) {
	for _, vr := range variants() {
		t.Run(vr.String(), func(t *testing.T) {
			s := vr.start(t, up.Options{})
			c := connect(t, s, vr.v03)
			first := stream(t, c.SendStreamingMessage(context.Background(), msg("ask: hi")), nil)
			if first.State() != a2a.TaskStateInputRequired || first.Status != up.AskQuestion {
				t.Fatalf("first turn: states %v, status %q", first.States, first.Status)
			}
			if vr.stream && first.Text(up.AskArtifact) != up.AskChunk {
				t.Errorf("first turn streamed %q, want %q", first.Text(up.AskArtifact), up.AskChunk)
			}
			second := stream(t, c.SendStreamingMessage(context.Background(), reply(first.Task, "Ada")), nil)
			if second.State() != a2a.TaskStateCompleted || second.Text(up.ReplyArtifact) != up.AskReply("Ada") || vr.stream && second.States[0] != a2a.TaskStateWorking {
				t.Fatalf("second turn: states %v (want working … completed), reply %q", second.States, second.Text(up.ReplyArtifact))
			}
			if m := s.LastMessage(); m.TaskID != first.Task.TaskID || m.ContextID != first.Task.ContextID {
				t.Errorf("last message on %s/%s, want %s/%s", m.TaskID, m.ContextID, first.Task.TaskID, first.Task.ContextID)
			}
			ex := s.Executions()
			last := ex[len(ex)-1]
			if last.Scenario != up.Answer || !last.Continued || last.TaskID != first.Task.TaskID ||
				len(last.History) < 2 || up.TextOf(last.History[0].Parts) != "ask: hi" || up.TextOf(last.History[len(last.History)-1].Parts) != "Ada" {
				t.Errorf("agent's second turn %+v", last)
			}
		})
	}
}

// TestAuthContinues: "auth:" reaches auth-required with its prompt (the
// stream stays open there, as a2a-go/v2 keeps auth-required executions);
// the next message on the task is the credential the waiting execution
// takes, and completes it.
func TestAuthContinues(t *testing.T) {
	for _, vr := range variants() {
		t.Run(vr.String(), func(t *testing.T) {
			s := vr.start(t, up.Options{})
			c := connect(t, s, vr.v03)
			ctx, cancel := context.WithCancel(context.Background())
			atAuth := func(v *up.Turn) bool { return v.State() == a2a.TaskStateAuthRequired }
			first := stream(t, c.SendStreamingMessage(ctx, msg("auth: please")), atAuth)
			cancel()
			if first.State() != a2a.TaskStateAuthRequired || first.Status != up.AuthPrompt {
				t.Fatalf("first turn: states %v, status %q", first.States, first.Status)
			}
			var second *up.Turn
			if vr.stream {
				second = stream(t, c.SendStreamingMessage(context.Background(), reply(first.Task, "token-1")), nil)
			} else {
				second = send(t, c, reply(first.Task, "token-1"))
			}
			if second.State() != a2a.TaskStateCompleted || second.Text(up.ReplyArtifact) != up.AuthReply("token-1") || vr.stream && second.States[0] != a2a.TaskStateWorking {
				t.Fatalf("second turn: states %v, reply %q", second.States, second.Text(up.ReplyArtifact))
			}
			ex := s.Executions()
			if last := ex[len(ex)-1]; last.Scenario != up.Authed || last.TaskID != first.Task.TaskID || up.TextOf(last.Message.Parts) != "token-1" {
				t.Errorf("agent's second turn %+v", last)
			}
		})
	}
}

// TestCancelSlow: a "slow:" task streams chunks until CancelTask; the
// cancel reaches the agent, the task ends canceled, and the stream (or,
// without streaming, GetTask) shows it.
func TestCancelSlow(t *testing.T) {
	for _, vr := range variants() {
		t.Run(vr.String(), func(t *testing.T) {
			s := vr.start(t, up.Options{})
			c := connect(t, s, vr.v03)
			ctx := context.Background()
			var id a2a.TaskID
			if vr.stream {
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
			if task.Status.State != a2a.TaskStateCanceled {
				t.Errorf("CancelTask answered %s", task.Status.State)
			}
			got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
			if err != nil || got.Status.State != a2a.TaskStateCanceled {
				t.Fatalf("GetTask after cancel: %v, %v", got, err)
			}
			if cs := s.Cancels(); len(cs) != 1 || cs[0] != id {
				t.Errorf("cancels %v, want [%s]", cs, id)
			}
		})
	}
}

// TestNoStreamingRefuses: a server without streaming refuses
// SubscribeToTask with the unsupported-operation error, and its card says
// so.
func TestNoStreamingRefuses(t *testing.T) {
	for _, b := range []a2a.TransportProtocol{up.JSONRPC, up.HTTPJSON, up.GRPC} {
		t.Run(string(b), func(t *testing.T) {
			s := up.Start(t, up.Options{Binding: b, NoStreaming: true})
			if s.Card().Capabilities.Streaming {
				t.Fatal("card declares streaming")
			}
			c := connect(t, s, false)
			res, err := c.SendMessage(context.Background(), msg("ask: q"))
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range c.SubscribeToTask(context.Background(), &a2a.SubscribeToTaskRequest{ID: res.TaskInfo().TaskID}) {
				if !errors.Is(err, a2a.ErrUnsupportedOperation) {
					t.Errorf("SubscribeToTask: %v, want %v", err, a2a.ErrUnsupportedOperation)
				}
				break
			}
		})
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, o := range []up.Options{
		{Binding: "SOAP"},
		{Binding: up.GRPC, Fault: up.Fault{Kind: up.FaultGarbage}},
		{Fault: up.Fault{Kind: up.FaultStatus, Status: 200}},
		{Fault: up.Fault{Kind: up.FaultStatus, Times: -1}},
		{SlowInterval: -time.Second},
		{Headers: map[string]string{"authorization": "x"}},
	} {
		if _, err := up.New(o); !errors.Is(err, up.ErrInvalidOption) {
			t.Errorf("New(%+v): %v, want %v", o, err, up.ErrInvalidOption)
		}
	}
}

// TestCheckCatches: Turn.Check reports a turn that differs from the
// scenario (so the checks above are not vacuous).
func TestCheckCatches(t *testing.T) {
	s := up.Start(t, up.Options{})
	c := connect(t, s, false)
	for _, tc := range []struct{ sent, checked string }{
		{"stream: a", "stream: b"}, {"tool: a", "tool: b"}, {"fail: a", "fail: b"},
		{"message: a", "message: b"}, {"file: a", "file: b"}, {"stream: a", "tool: a"}, {"echo a", "fail: a"},
	} {
		v := stream(t, c.SendStreamingMessage(context.Background(), msg(tc.sent)), nil)
		if err := v.Check(tc.checked, true); err == nil {
			t.Errorf("the turn of %q passes the check of %q", tc.sent, tc.checked)
		}
	}
	if err := up.NewTurn().Check("slow: x", false); err == nil {
		t.Error("Check of a multi-turn scenario passes")
	}
}

// TestResubscribe: a client that drops a "slow:" stream (a worker that
// dies) gets the task back with SubscribeToTask, v1.0 and v0.3 over every
// binding: the task as it stands (the chunks sent so far), then the
// chunks that follow, then the canceled status once it is canceled. A
// finished task cannot be subscribed to.
func TestResubscribe(t *testing.T) {
	for _, vr := range variants() {
		if !vr.stream {
			continue
		}
		t.Run(vr.String(), func(t *testing.T) {
			s := vr.start(t, up.Options{})
			c := connect(t, s, vr.v03)
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
			if again.State() != a2a.TaskStateCanceled || again.Task.TaskID != id {
				t.Fatalf("subscription: states %v on %s, want … canceled on %s", again.States, again.Task.TaskID, id)
			}
			if got := again.Text(up.SlowArtifact); got != slowText(strings.Count(got, "tick")) || strings.Count(got, "tick") < 4 {
				t.Errorf("subscription's slow text %q, want every chunk once from the first, more than the 2 streamed before", got)
			}
			for _, err := range c.SubscribeToTask(context.Background(), &a2a.SubscribeToTaskRequest{ID: id}) {
				if err == nil {
					t.Error("a canceled task was subscribed to")
				}
				break
			}
		})
	}
}

// TestContextContinues: a message naming only the context of an earlier
// task starts a new task in that context; the agent's turns show both.
func TestContextContinues(t *testing.T) {
	s := up.Start(t, up.Options{})
	c := connect(t, s, false)
	first := send(t, c, msg("one"))
	next := msg("two")
	next.Message.ContextID = first.Task.ContextID
	second := send(t, c, next)
	ex := s.Executions()
	if second.Task.ContextID != first.Task.ContextID || second.Task.TaskID == first.Task.TaskID ||
		len(ex) != 2 || ex[1].ContextID != first.Task.ContextID || ex[1].Continued {
		t.Errorf("second task %+v after %+v; agent's turns %+v", second.Task, first.Task, ex)
	}
}

// slowText is the text of the first n chunks of "slow:".
func slowText(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(up.SlowChunk(i))
	}
	return b.String()
}
