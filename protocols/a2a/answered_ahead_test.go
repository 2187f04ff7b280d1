package a2a_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	v03 "github.com/a2aproject/a2a-go/a2a"
	v03client "github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	grpcv1 "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// A task's slow turn streams; meanwhile the client sends the next turn,
// which the agent ends asking (input-required), and the answer, both
// queued behind it. Each stream of the slow turn goes on with both to the
// task's end: the question's status is not the task's end, its answer
// recorded already.

// answeredAhead is a pipeline whose pool "av" (also the default pool)
// holds "slow" after its first chunk until gate is closed (its answer
// "working, done"), asks "Which city?" on "ask", and
// answers anything else "Hello, <text>".
type answeredAhead struct {
	*pipetest.Pipeline
	gate chan struct{}
}

func startAnsweredAhead(t *testing.T) *answeredAhead {
	t.Helper()
	g := &answeredAhead{Pipeline: pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithIngress(ingress.WithDefaultPool("av"))),
		gate: make(chan struct{})}
	g.Pool("av", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		switch text := env.ParamString("text"); text {
		case "slow":
			if err := w.Chunk(e2a.DeltaText, "working, "); err != nil {
				return err
			}
			if err := w.Sync(); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-g.gate:
			}
			if err := w.Chunk(e2a.DeltaText, "done"); err != nil {
				return err
			}
			return w.Complete(nil)
		case "ask":
			return agent.Interrupt(w, e2a.StateInputRequired, "Which city?")
		default:
			if err := w.Chunk(e2a.DeltaText, "Hello, "+text); err != nil {
				return err
			}
			return w.Complete(nil)
		}
	}))
	return g
}

// v1Binding is a2a-go/v2's client on one binding of the pipeline g (its
// gRPC binding: pipetest.WithGRPC).
func v1Binding(t *testing.T, g *pipetest.Pipeline, binding a2a.TransportProtocol) *a2aclient.Client {
	t.Helper()
	url := g.URL + ingress.A2AV1Path
	if binding == a2a.TransportProtocolGRPC {
		url = g.GRPCAddr
	}
	c, err := a2aclient.NewFromEndpoints(context.Background(), []*a2a.AgentInterface{a2a.NewAgentInterface(url, binding)},
		a2aclient.WithJSONRPCTransport(http.DefaultClient), a2aclient.WithRESTTransport(http.DefaultClient),
		grpcv1.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// queueAskAndAnswer sends "ask" and then the answer "Rome" to the task,
// each returning at once (queued behind the running turn), and then lets
// the slow turn end.
func (g *answeredAhead) queueAskAndAnswer(t *testing.T, ctx context.Context, c *a2aclient.Client, task a2a.TaskInfoProvider) {
	t.Helper()
	for _, text := range []string{"ask", "Rome"} {
		req := up.Reply(task, text)
		req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
		if _, err := c.SendMessage(ctx, req); err != nil {
			t.Fatalf("%s, non-blocking: %v", text, err)
		}
	}
	close(g.gate)
}

// streamSeen is what a stream showed: the text of its events, the states
// of its status-updates (and their messages' text), the number of v0.3
// final flags.
type streamSeen struct {
	text, states []string
	finals       int
}

func (s *streamSeen) status(state, message string, final bool) {
	s.states = append(s.states, state+"("+message+")")
	if final {
		s.finals++
	}
}

// check fails t unless the stream went on to the answer's reply and
// ended completed, the question's status written in the state the task
// then had (submitted: the answer's turn, not begun) with its message.
func (s *streamSeen) check(t *testing.T, name string, submitted, completed string) {
	t.Helper()
	got := strings.Join(s.states, " ")
	if !strings.Contains(strings.Join(s.text, ""), "Hello, Rome") || len(s.states) == 0 ||
		s.states[len(s.states)-1] != completed+"()" || !strings.Contains(got, submitted+"(Which city?)") ||
		strings.Contains(strings.ToLower(got), "input") {
		t.Errorf("%s: text %q, states %s\nwant the answer's reply \"Hello, Rome\", the question's status %s with it, the stream ending %s",
			name, s.text, got, submitted, completed)
	}
}

func v1Text(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	return up.TextOf(m.Parts)
}

// readV1 reads a v1.0 stream to its end; first is called at its first
// event.
func readV1(t *testing.T, evs func(yield func(a2a.Event, error) bool), first func(a2a.TaskInfoProvider)) *streamSeen {
	t.Helper()
	s := &streamSeen{}
	for ev, err := range evs {
		if err != nil {
			t.Fatalf("after %v: %v", s.states, err)
		}
		if first != nil {
			first(ev.(a2a.TaskInfoProvider))
			first = nil
		}
		switch e := ev.(type) {
		case *a2a.TaskArtifactUpdateEvent:
			s.text = append(s.text, up.TextOf(e.Artifact.Parts))
		case *a2a.TaskStatusUpdateEvent:
			s.status(string(e.Status.State), v1Text(e.Status.Message), false)
		}
	}
	return s
}

// TestInterruptedTurnAnsweredAheadV1Stream: A2A v1.0 SendStreamingMessage
// of the slow turn (JSON-RPC, HTTP+JSON, gRPC) goes on with the question's
// turn and the answer's, both queued while it ran, to the task's end. It
// ended at the question (input-required), the answer already recorded
// and running to completed.
func TestInterruptedTurnAnsweredAheadV1Stream(t *testing.T) {
	eachV1Binding(t, func(t *testing.T, g *answeredAhead, ctx context.Context, c *a2aclient.Client) {
		s := readV1(t, c.SendStreamingMessage(ctx, up.Msg("slow")), func(task a2a.TaskInfoProvider) {
			g.queueAskAndAnswer(t, ctx, c, task)
		})
		s.check(t, "SendStreamingMessage", string(a2a.TaskStateSubmitted), string(a2a.TaskStateCompleted))
	})
}

// eachV1Binding runs test on a pipeline of its own (startAnsweredAhead)
// with a2a-go/v2's client on each v1.0 binding (JSON-RPC, HTTP+JSON,
// gRPC), within 30 s.
func eachV1Binding(t *testing.T, test func(t *testing.T, g *answeredAhead, ctx context.Context, c *a2aclient.Client)) {
	for _, b := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC} {
		t.Run(string(b), func(t *testing.T) {
			g := startAnsweredAhead(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			test(t, g, ctx, v1Binding(t, g.Pipeline, b))
		})
	}
}

// v03Client is a2a-go v0.3's client on the pipeline g's /a2a.
func v03Client(t *testing.T, g *pipetest.Pipeline) *v03client.Client {
	t.Helper()
	c, err := v03client.NewFromEndpoints(context.Background(), []v03.AgentInterface{{URL: g.URL + "/a2a", Transport: v03.TransportProtocolJSONRPC}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// readV03 reads a v0.3 stream to its end; first is called at its first
// event.
func readV03(t *testing.T, evs func(yield func(v03.Event, error) bool), first func(v03.TaskInfo)) *streamSeen {
	t.Helper()
	s := &streamSeen{}
	for ev, err := range evs {
		if err != nil {
			t.Fatalf("after %v: %v", s.states, err)
		}
		if first != nil {
			first(ev.TaskInfo())
			first = nil
		}
		switch e := ev.(type) {
		case *v03.TaskArtifactUpdateEvent:
			for _, p := range e.Artifact.Parts {
				if tp, ok := p.(v03.TextPart); ok {
					s.text = append(s.text, tp.Text)
				}
			}
		case *v03.TaskStatusUpdateEvent:
			msg := ""
			if m := e.Status.Message; m != nil {
				for _, p := range m.Parts {
					if tp, ok := p.(v03.TextPart); ok {
						msg += tp.Text
					}
				}
			}
			s.status(string(e.Status.State), msg, e.Final)
		}
	}
	return s
}

// TestInterruptedTurnAnsweredAheadV03Stream: A2A v0.3 message/stream of
// the slow turn, and tasks/resubscribe opened while it ran, go on with
// the question's turn and the answer's, queued since, to the task's end,
// final:true written once, at its end. Both ended at the question
// (input-required, final:true).
func TestInterruptedTurnAnsweredAheadV03Stream(t *testing.T) {
	t.Run("message/stream", func(t *testing.T) {
		g := startAnsweredAhead(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, v1 := v03Client(t, g.Pipeline), v1Binding(t, g.Pipeline, a2a.TransportProtocolJSONRPC)
		s := readV03(t, c.SendStreamingMessage(ctx, &v03.MessageSendParams{Message: v03.NewMessage(v03.MessageRoleUser, v03.TextPart{Text: "slow"})}),
			func(task v03.TaskInfo) {
				g.queueAskAndAnswer(t, ctx, v1, a2a.TaskInfo{TaskID: a2a.TaskID(task.TaskID), ContextID: task.ContextID})
			})
		s.check(t, "message/stream", string(v03.TaskStateSubmitted), string(v03.TaskStateCompleted))
		if s.finals != 1 {
			t.Errorf("message/stream: %d events final:true (%v), want one, the last", s.finals, s.states)
		}
	})
	t.Run("tasks/resubscribe", func(t *testing.T) {
		g := startAnsweredAhead(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, v1 := v03Client(t, g.Pipeline), v1Binding(t, g.Pipeline, a2a.TransportProtocolJSONRPC)
		req := up.Msg("slow")
		req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
		res, err := v1.SendMessage(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		task := res.(*a2a.Task)
		s := readV03(t, c.ResubscribeToTask(ctx, &v03.TaskIDParams{ID: v03.TaskID(task.ID)}), func(v03.TaskInfo) {
			g.queueAskAndAnswer(t, ctx, v1, task)
		})
		s.check(t, "tasks/resubscribe", string(v03.TaskStateSubmitted), string(v03.TaskStateCompleted))
		if s.finals != 1 {
			t.Errorf("tasks/resubscribe: %d events final:true (%v), want one, the last", s.finals, s.states)
		}
	})
}

// TestInterruptedTurnAnsweredAheadAgentVault: AgentVault's
// tasks/sendSubscribe of the slow turn goes on with the question's turn
// and the answer's, queued since (tasks/send), to the task's end. It ended
// at the question (INPUT_REQUIRED).
func TestInterruptedTurnAnsweredAheadAgentVault(t *testing.T) {
	g := startAnsweredAhead(t)
	c := avClient{t, g.URL, ""}
	first := true
	s := readAV(t, c.post("tasks/sendSubscribe", `{"message":`+avText("slow")+`}`, true), func(s *avSeen) {
		if !first {
			return
		}
		first = false
		for _, text := range []string{"ask", "Rome"} {
			if code := c.call("tasks/send", `{"id":"`+s.taskID+`","message":`+avText(text)+`}`, nil); code != 0 {
				t.Fatalf("tasks/send %s: error %d", text, code)
			}
		}
		close(g.gate)
	})
	seen := &streamSeen{states: s.states}
	for _, m := range s.messages {
		seen.text = append(seen.text, avJSON(m))
	}
	if got := strings.Join(s.states, " "); len(s.errors) > 0 || !strings.Contains(strings.Join(seen.text, ""), "Hello, Rome") ||
		s.states[len(s.states)-1] != "COMPLETED" || strings.Contains(got, "INPUT_REQUIRED") ||
		!strings.Contains(strings.Join(seen.text, ""), "Which city?") {
		t.Errorf("tasks/sendSubscribe: states %s, messages %s, errors %v\nwant the question, the answer's reply \"Hello, Rome\", the stream ending COMPLETED",
			got, seen.text, s.errors)
	}
}
