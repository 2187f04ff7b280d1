package a2aupstream

import (
	"context"
	"iter"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	grpcv0 "github.com/a2aproject/a2a-go/v2/a2agrpc/v0"
	grpcv1 "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The client side of the scenarios, shared by the tests of every A2A
// server that plays them (this package's, internal/jsupstream's):
// a2a-go/v2's client built from the server's card, the calls, and the
// checks of the multi-turn scenarios.

// Connect resolves the agent card at base as a client would (the v0.3
// parser for a v0.3 card) and builds a2a-go/v2's client from it with the
// given transports, or, with none given, every transport this package's
// servers speak (JSON-RPC, HTTP+JSON and gRPC, v1.0 and v0.3). The client
// is destroyed when t ends.
func Connect(t testing.TB, base string, v03 bool, transports ...a2aclient.FactoryOption) *a2aclient.Client {
	t.Helper()
	resolver := agentcard.DefaultResolver
	if v03 {
		resolver = &agentcard.Resolver{CardParser: a2av0.NewAgentCardParser()}
	}
	if len(transports) == 0 {
		creds := grpc.WithTransportCredentials(insecure.NewCredentials())
		transports = []a2aclient.FactoryOption{grpcv1.WithGRPCTransport(creds), grpcv0.WithGRPCTransport(creds),
			a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{}), a2av0.WithRESTTransport(a2av0.RESTTransportConfig{})}
	}
	return connect(t, resolver, base, transports)
}

// Client resolves the A2A v1.0 agent card at url and builds a2a-go/v2's
// client from it as an application would: a2a-go's default transports
// (JSON-RPC and HTTP+JSON, v1.0) and what opts add. The client is
// destroyed when t ends.
func Client(t testing.TB, url string, opts ...a2aclient.FactoryOption) *a2aclient.Client {
	t.Helper()
	return connect(t, agentcard.DefaultResolver, url, opts)
}

func connect(t testing.TB, resolver *agentcard.Resolver, url string, opts []a2aclient.FactoryOption) *a2aclient.Client {
	t.Helper()
	ctx := context.Background()
	card, err := resolver.Resolve(ctx, url)
	if err != nil {
		t.Fatalf("agent card at %s: %v", url, err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// WithAPIKey returns ctx with key as the X-Api-Key header of the calls a
// client makes with it (an API key of the pipeline's ingress).
func WithAPIKey(ctx context.Context, key string) context.Context {
	sp := a2aclient.ServiceParams{}
	sp.Append("X-Api-Key", key)
	return a2aclient.AttachServiceParams(ctx, sp)
}

// Msg is a user message with one text part, starting a task.
func Msg(text string) *a2a.SendMessageRequest {
	return &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))}
}

// Reply is a user message with one text part on task's task and context.
func Reply(task a2a.TaskInfoProvider, text string) *a2a.SendMessageRequest {
	return &a2a.SendMessageRequest{Message: a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart(text))}
}

// Asked sends req and returns the task the agent answered it with,
// failing t unless that is a Task asking for input (input-required): the
// first half of an interrupted task's test.
func Asked(t testing.TB, ctx context.Context, c *a2aclient.Client, req *a2a.SendMessageRequest) *a2a.Task {
	t.Helper()
	task := SentTask(t, ctx, c, req)
	if task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("the question's message answered %+v, want an input-required task", task)
	}
	return task
}

// SentTask sends req with c (SendMessage) and returns its answer, failing
// t unless that is a Task.
func SentTask(t testing.TB, ctx context.Context, c *a2aclient.Client, req *a2a.SendMessageRequest) *a2a.Task {
	t.Helper()
	res, err := c.SendMessage(ctx, req)
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage answered %T, want the task", res)
	}
	return task
}

// Collect reads a streaming call to its end, failing t on an error; stop,
// when set, ends reading early (the turn so far is returned).
func Collect(t testing.TB, events iter.Seq2[a2a.Event, error], stop func(*Turn) bool) *Turn {
	t.Helper()
	v := NewTurn()
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

// Send makes a SendMessage call, failing t on an error, and returns its
// result as a turn.
func Send(t testing.TB, c *a2aclient.Client, req *a2a.SendMessageRequest) *Turn {
	t.Helper()
	res, err := c.SendMessage(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	v := NewTurn()
	v.Add(res)
	return v
}

// SlowText is the text of the first n chunks of "slow:".
func SlowText(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(SlowChunk(i))
	}
	return b.String()
}

// SingleTurns plays every single-turn scenario (stream, tool, fail,
// message, file, and an echo), each streamed and with SendMessage, as
// subtests named "stream/<text>" and "send/<text>", and checks each
// turn's exact content (event by event when streamed from a server that
// streams, serverStreams).
func SingleTurns(t *testing.T, c *a2aclient.Client, serverStreams bool) {
	t.Helper()
	texts := []string{Stream + ": some body", Tool + ": some body", Fail + ": some body", Message + ": some body", File + ": some body", "just words"}
	for _, how := range []string{"stream", "send"} {
		for _, text := range texts {
			t.Run(how+"/"+text, func(t *testing.T) {
				var v *Turn
				if how == "stream" {
					v = Collect(t, c.SendStreamingMessage(context.Background(), Msg(text)), nil)
				} else {
					v = Send(t, c, Msg(text))
				}
				if err := v.Check(text, how == "stream" && serverStreams); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// AskTurns plays "ask:" streamed: the first turn must stop in
// input-required with AskQuestion, and the answer "Ada", streamed on the
// same task, must complete it with AskReply (after a working status when
// the server streams).
func AskTurns(t testing.TB, c *a2aclient.Client, streaming bool) (first, second *Turn) {
	t.Helper()
	first = Collect(t, c.SendStreamingMessage(context.Background(), Msg("ask: hi")), nil)
	if first.State() != a2a.TaskStateInputRequired || first.Status != AskQuestion {
		t.Fatalf("first turn: states %v, status %q", first.States, first.Status)
	}
	second = Collect(t, c.SendStreamingMessage(context.Background(), Reply(first.Task, "Ada")), nil)
	if second.State() != a2a.TaskStateCompleted || second.Text(ReplyArtifact) != AskReply("Ada") || streaming && second.States[0] != a2a.TaskStateWorking {
		t.Fatalf("second turn: states %v (want working … completed), reply %q", second.States, second.Text(ReplyArtifact))
	}
	return first, second
}

// AuthTurns plays "auth:": the first turn, streamed, is read up to
// auth-required with AuthPrompt (the stream stays open there); the
// credential "token-1" on the same task, streamed when the server streams
// and sent otherwise, must complete it with AuthReply.
func AuthTurns(t testing.TB, c *a2aclient.Client, streaming bool) (first, second *Turn) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	atAuth := func(v *Turn) bool { return v.State() == a2a.TaskStateAuthRequired }
	first = Collect(t, c.SendStreamingMessage(ctx, Msg("auth: please")), atAuth)
	cancel()
	if first.State() != a2a.TaskStateAuthRequired || first.Status != AuthPrompt {
		t.Fatalf("first turn: states %v, status %q", first.States, first.Status)
	}
	if streaming {
		second = Collect(t, c.SendStreamingMessage(context.Background(), Reply(first.Task, "token-1")), nil)
	} else {
		second = Send(t, c, Reply(first.Task, "token-1"))
	}
	if second.State() != a2a.TaskStateCompleted || second.Text(ReplyArtifact) != AuthReply("token-1") || streaming && second.States[0] != a2a.TaskStateWorking {
		t.Fatalf("second turn: states %v, reply %q", second.States, second.Text(ReplyArtifact))
	}
	return first, second
}

// CancelSlow starts "slow:" (streamed up to its third chunk when the server
// streams, else sent with ReturnImmediately) and cancels it: CancelTask
// and then GetTask must answer the task canceled. It returns the task's id.
func CancelSlow(t testing.TB, c *a2aclient.Client, streaming bool) a2a.TaskID {
	t.Helper()
	ctx := context.Background()
	var id a2a.TaskID
	if streaming {
		v := Collect(t, c.SendStreamingMessage(ctx, Msg("slow: x")), func(v *Turn) bool { return v.Chunks[SlowArtifact] == 3 })
		id = v.Task.TaskID
		if got := v.Text(SlowArtifact); got != SlowText(3) {
			t.Errorf("slow chunks %q", got)
		}
	} else {
		req := Msg("slow: x")
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
	return id
}

// ResubscribeSlow drops a "slow:" stream after two chunks (a client, or a
// worker, that dies) and gets the task back with SubscribeToTask, which it
// cancels once two more chunks came: the subscription must end canceled,
// on the same task, with every chunk once from the first and more than
// the 2 streamed before. It returns the task's id.
func ResubscribeSlow(t testing.TB, c *a2aclient.Client) a2a.TaskID {
	t.Helper()
	ctx, drop := context.WithCancel(context.Background())
	first := Collect(t, c.SendStreamingMessage(ctx, Msg("slow: x")), func(v *Turn) bool { return v.Chunks[SlowArtifact] == 2 })
	drop()
	id := first.Task.TaskID
	canceled := false
	again := Collect(t, c.SubscribeToTask(context.Background(), &a2a.SubscribeToTaskRequest{ID: id}), func(v *Turn) bool {
		if v.Chunks[SlowArtifact] == 2 && !canceled {
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
	if got := again.Text(SlowArtifact); got != SlowText(strings.Count(got, "tick")) || strings.Count(got, "tick") < 4 {
		t.Errorf("subscription's slow text %q, want every chunk once from the first, more than the 2 streamed before", got)
	}
	return id
}
