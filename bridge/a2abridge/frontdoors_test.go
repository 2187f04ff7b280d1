package a2abridge_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/jsupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// agentUnderTest is a running upstream agent and what it recorded.
type agentUnderTest struct {
	url string
	// task is the upstream task of the turn the agent ran for the user
	// message text, and whether that turn continued an existing task.
	task func(t *testing.T, text string) (taskID string, continued bool)
	// contextOf is the upstream context of the turn the agent ran for
	// the user message text.
	contextOf func(t *testing.T, text string) string
	// cancels are the upstream tasks the agent was asked to cancel.
	cancels func(t *testing.T) []string
}

type upstreamKind struct {
	name  string
	start func(t *testing.T) agentUnderTest
}

// bridged starts the agent and a pipeline (with opts) whose default pool
// "agent" is served by a bridge to it.
func (u upstreamKind) bridged(t *testing.T, opts ...pipetest.Option) (agentUnderTest, *pipetest.Pipeline) {
	t.Helper()
	a := u.start(t)
	p := pipetest.Start(t, append(opts, pipetest.WithIngress(ingress.WithDefaultPool("agent")))...)
	bridgePool(t, p, "agent", a.url)
	return a, p
}

// goAgent is a2aupstream's a2a-go/v2 server.
func goAgent(o up.Options) func(*testing.T) agentUnderTest {
	return func(t *testing.T) agentUnderTest {
		if o.SlowInterval == 0 {
			o.SlowInterval, o.SlowChunks = 20*time.Millisecond, 1500
		}
		srv := up.Start(t, o)
		return agentUnderTest{url: srv.BaseURL(),
			task: func(t *testing.T, text string) (string, bool) { return executionOf(srv, text) },
			contextOf: func(t *testing.T, text string) string {
				for _, e := range srv.Executions() {
					if e.Message != nil && up.TextOf(e.Message.Parts) == text {
						return e.ContextID
					}
				}
				return ""
			},
			cancels: func(*testing.T) []string {
				var out []string
				for _, id := range srv.Cancels() {
					out = append(out, string(id))
				}
				return out
			}}
	}
}

// jsAgent is an @a2a-js/sdk 1.3 server in Node.
func jsAgent(o jsupstream.Options) func(*testing.T) agentUnderTest {
	return func(t *testing.T) agentUnderTest {
		o.SlowInterval, o.SlowChunks = 20*time.Millisecond, 1500
		srv := jsupstream.Start(t, o)
		record := func(t *testing.T) jsupstream.Record {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := srv.Record(ctx)
			if err != nil {
				t.Fatalf("the JS agent's record: %v", err)
			}
			return r
		}
		return agentUnderTest{url: srv.BaseURL(),
			task: func(t *testing.T, text string) (string, bool) {
				for _, e := range record(t).Executions {
					if e.Text == text {
						return e.TaskID, e.Continued
					}
				}
				return "", false
			},
			contextOf: func(t *testing.T, text string) string {
				for _, e := range record(t).Executions {
					if e.Text == text {
						return e.ContextID
					}
				}
				return ""
			},
			cancels: func(t *testing.T) []string { return record(t).Cancels }}
	}
}

var upstreamKinds = []upstreamKind{
	{"go-jsonrpc", goAgent(up.Options{Binding: up.JSONRPC})},
	{"go-rest", goAgent(up.Options{Binding: up.HTTPJSON})},
	{"go-grpc", goAgent(up.Options{Binding: up.GRPC})},
	{"go-jsonrpc-nostream", goAgent(up.Options{Binding: up.JSONRPC, NoStreaming: true})},
	{"python-jsonrpc", goAgent(up.Options{Binding: up.JSONRPC, Wire: up.WirePython})},
	{"go-v03-jsonrpc", goAgent(up.Options{Binding: up.JSONRPC, V03: true})},
	{"go-v03-rest", goAgent(up.Options{Binding: up.HTTPJSON, V03: true})},
	{"go-v03-grpc", goAgent(up.Options{Binding: up.GRPC, V03: true})},
	{"js", jsAgent(jsupstream.Options{})},
	{"js-nostream", jsAgent(jsupstream.Options{NoStreaming: true})},
	{"js-v03", jsAgent(jsupstream.Options{V03: true})},
	{"js-rest", jsAgent(jsupstream.Options{Binding: up.HTTPJSON})},
	{"js-grpc", jsAgent(jsupstream.Options{Binding: up.GRPC})},
}

// TestFrontDoors: every kind of upstream A2A agent (a2a-go/v2's server
// over JSON-RPC, HTTP+JSON and gRPC, without streaming, answering as the
// Python SDK frames its answers (up.WirePython), and as a v0.3 agent over
// each binding; @a2a-js/sdk 1.3's server in Node, v1.0 over
// its three bindings, without streaming and v0.3) behind the bridge, driven from every front door
// (a2a-go/v2's client over the pipeline's three A2A v1.0 bindings, the
// a2a-go v0.3 client, E2A over SSE dropped after two frames and resumed
// with Last-Event-ID, acp-go-sdk over stdio): a stream's text, thoughts
// and data part (in the agent's artifacts, under their ids, for A2A
// clients); a question whose answer continues the same upstream task; an
// auth-required turn whose next message completes the task; a failure
// with the agent's message; a long task cancelled through the door, the
// cancel reaching the agent (CancelTask).
func TestFrontDoors(t *testing.T) {
	t.Parallel()
	for _, u := range upstreamKinds {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			a, p := u.bridged(t, pipetest.WithGRPC())
			for _, d := range doors {
				t.Run(d.name, func(t *testing.T) {
					tag := u.name + "/" + d.name
					checkStream(t, d, d.open(t, p, "agent").send(t, "stream: "+tag), tag)
					checkAsk(t, d, a, d.open(t, p, "agent"), tag)
					checkAuth(t, d, d.open(t, p, "agent"), tag)
					checkFail(t, d.open(t, p, "agent").send(t, "fail: "+tag), tag)
					checkCancel(t, a, d.open(t, p, "agent"), tag)
				})
			}
		})
	}
}

func checkStream(t *testing.T, d door, s seen, tag string) {
	t.Helper()
	if s.state != "completed" || s.text != up.StreamText(tag) || s.reasoning != up.Thought(tag) {
		t.Errorf("stream: %s, text %q, reasoning %q; want completed, %q, %q", s.state, s.text, s.reasoning, up.StreamText(tag), up.Thought(tag))
	}
	if d.data && (len(s.data) != 1 || !reflect.DeepEqual(s.data[0], up.StreamData())) {
		t.Errorf("stream: data parts %v, want one %v", s.data, up.StreamData())
	}
	if s.artifacts != nil {
		// The agent's artifacts under their ids (message/send's answer
		// puts the thoughts in the task's history).
		want := map[a2a.ArtifactID]string{up.TextArtifact: up.StreamText(tag), up.ThoughtArtifact: up.Thought(tag), up.DataArtifact: ""}
		if _, ok := s.artifacts[up.ThoughtArtifact]; !ok {
			delete(want, up.ThoughtArtifact)
		}
		if !reflect.DeepEqual(s.artifacts, want) {
			t.Errorf("stream: artifacts %q, want the agent's %q", s.artifacts, want)
		}
	}
}

func checkAsk(t *testing.T, d door, a agentUnderTest, c conv, tag string) {
	t.Helper()
	ask, answer := "ask: "+tag, "Ada of "+tag
	s := c.send(t, ask)
	if d.interrupts && (s.state != "input-required" || s.message != up.AskQuestion) {
		t.Errorf("ask: %s %q, want input-required %q", s.state, s.message, up.AskQuestion)
	}
	if !d.interrupts && (s.state != "completed" || !strings.Contains(s.text, up.AskQuestion)) {
		t.Errorf("ask: %s %q, want the turn to end with %q", s.state, s.text, up.AskQuestion)
	}
	question := s
	s = c.send(t, answer)
	if s.state != "completed" || !strings.Contains(s.text, up.AskReply(answer)) {
		t.Errorf("answer: %s %q, want completed with %q", s.state, s.text, up.AskReply(answer))
	}
	if v, ok := c.(*v1Conv); ok {
		// The pipeline's task is the one that asked, and it is completed.
		task, err := v.c.GetTask(testCtx(t), &a2a.GetTaskRequest{ID: a2a.TaskID(question.taskID)})
		if err != nil || task.Status.State != a2a.TaskStateCompleted || (s.taskID != "" && s.taskID != question.taskID) {
			t.Errorf("GetTask %s after the answer (answered in %s): %+v %v", question.taskID, s.taskID, task, err)
		}
	}
	asked, _ := a.task(t, ask)
	answered, continued := a.task(t, answer)
	if asked == "" || answered != asked || !continued {
		t.Errorf("the answer reached upstream task %q (continued %v), the question came from %q", answered, continued, asked)
	}
}

func checkAuth(t *testing.T, d door, c conv, tag string) {
	t.Helper()
	s := c.send(t, "auth: "+tag)
	if d.interrupts && (s.state != "auth-required" || s.message != up.AuthPrompt) {
		t.Errorf("auth: %s %q, want auth-required %q", s.state, s.message, up.AuthPrompt)
	}
	if !d.interrupts && (s.state != "completed" || !strings.Contains(s.text, up.AuthPrompt)) {
		t.Errorf("auth: %s %q, want the turn to end with %q", s.state, s.text, up.AuthPrompt)
	}
	token := "token of " + tag
	if s = c.send(t, token); s.state != "completed" || !strings.Contains(s.text, up.AuthReply(token)) {
		t.Errorf("after auth: %s %q, want completed with %q", s.state, s.text, up.AuthReply(token))
	}
}

func checkFail(t *testing.T, s seen, tag string) {
	t.Helper()
	if s.state != "failed" || !strings.Contains(s.message, up.FailText(tag)) {
		t.Errorf("fail: %s %q, want failed with %q", s.state, s.message, up.FailText(tag))
	}
}

func checkCancel(t *testing.T, a agentUnderTest, c conv, tag string) {
	t.Helper()
	slow := "slow: " + tag
	if s := c.cancel(t, slow); s.state != "canceled" || !strings.HasPrefix(s.text, up.SlowChunk(1)) {
		t.Errorf("cancel: %s, text %q; want canceled after %q", s.state, s.text, up.SlowChunk(1))
	}
	task, _ := a.task(t, slow)
	testkit.Eventually(t, 20*time.Second, "the agent's task "+task+" cancelled", func() bool {
		return task != "" && slices.Contains(a.cancels(t), task)
	})
}
