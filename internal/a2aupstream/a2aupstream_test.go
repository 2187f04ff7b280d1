package a2aupstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

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

// TestScenarios: every scenario's exact content reaches a2a-go/v2's client
// over every binding, v1.0 and v0.3, streaming (event by event: chunks,
// lastChunk, the thought mark) and with SendMessage (the final task).
func TestScenarios(t *testing.T) {
	for _, vr := range variants() {
		t.Run(vr.String(), func(t *testing.T) {
			s := vr.start(t, up.Options{})
			c := up.Connect(t, s.BaseURL(), vr.v03)
			up.SingleTurns(t, c, vr.stream)
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
			c := up.Connect(t, s.BaseURL(), vr.v03)
			first, _ := up.AskTurns(t, c, vr.stream)
			if vr.stream && first.Text(up.AskArtifact) != up.AskChunk {
				t.Errorf("first turn streamed %q, want %q", first.Text(up.AskArtifact), up.AskChunk)
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
			c := up.Connect(t, s.BaseURL(), vr.v03)
			first, _ := up.AuthTurns(t, c, vr.stream)
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
			c := up.Connect(t, s.BaseURL(), vr.v03)
			id := up.CancelSlow(t, c, vr.stream)
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
			c := up.Connect(t, s.BaseURL(), false)
			res, err := c.SendMessage(context.Background(), up.Msg("ask: q"))
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
		{Wire: "ruby"},
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
	c := up.Connect(t, s.BaseURL(), false)
	for _, tc := range []struct{ sent, checked string }{
		{"stream: a", "stream: b"}, {"tool: a", "tool: b"}, {"fail: a", "fail: b"},
		{"message: a", "message: b"}, {"file: a", "file: b"}, {"stream: a", "tool: a"}, {"echo a", "fail: a"},
	} {
		v := up.Collect(t, c.SendStreamingMessage(context.Background(), up.Msg(tc.sent)), nil)
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
			c := up.Connect(t, s.BaseURL(), vr.v03)
			id := up.ResubscribeSlow(t, c)
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
	c := up.Connect(t, s.BaseURL(), false)
	first := up.Send(t, c, up.Msg("one"))
	next := up.Msg("two")
	next.Message.ContextID = first.Task.ContextID
	second := up.Send(t, c, next)
	ex := s.Executions()
	if second.Task.ContextID != first.Task.ContextID || second.Task.TaskID == first.Task.TaskID ||
		len(ex) != 2 || ex[1].ContextID != first.Task.ContextID || ex[1].Continued {
		t.Errorf("second task %+v after %+v; agent's turns %+v", second.Task, first.Task, ex)
	}
}
