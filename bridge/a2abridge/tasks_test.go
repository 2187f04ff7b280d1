package a2abridge_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/jsupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// taskConv is a front door's conversation whose next message names the
// task and context given.
type taskConv interface {
	conv
	next(taskID, contextID string)
	// cancelTask cancels the pipeline's task through the door.
	cancelTask(t *testing.T, taskID string)
}

func (v v1TaskConv) cancelTask(t *testing.T, taskID string) {
	t.Helper()
	task, err := v.c.CancelTask(testCtx(t), &a2a.CancelTaskRequest{ID: a2a.TaskID(taskID)})
	if err != nil || task.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask %s: %+v, %v", taskID, task, err)
	}
}

func (v v03TaskConv) cancelTask(t *testing.T, taskID string) {
	t.Helper()
	task, err := v.c.CancelTask(testCtx(t), &a2a03.TaskIDParams{ID: a2a03.TaskID(taskID)})
	if err != nil || task.Status.State != a2a03.TaskStateCanceled {
		t.Fatalf("tasks/cancel %s: %+v, %v", taskID, task, err)
	}
}

type v1TaskConv struct{ *v1Conv }

func (v v1TaskConv) next(taskID, contextID string) {
	v.taskID, v.contextID = a2a.TaskID(taskID), contextID
}

type v03TaskConv struct{ *v03Conv }

func (v v03TaskConv) next(taskID, contextID string) { v.taskID, v.contextID = taskID, contextID }

// TestTasksOfOneContext: two pipeline tasks of one context, each with its
// own upstream task. Task 1 asks (input-required); task 2 starts in the
// same context and asks too; task 2 is answered, then task 1: each answer
// reaches its own upstream task (the agent records the task of every
// turn it runs), task 2's first message started a new upstream task in
// task 1's upstream context, and both pipeline tasks end completed with
// their own answers. Then two more tasks of one context ask, and the
// first is cancelled: the agent is asked to cancel its task and not the
// other's, which its answer then completes. Upstreams: a2a-go/v2's server (streaming, and
// without streaming) and @a2a-js/sdk 1.3's; front doors: a2a-go/v2's
// v1.0 client (JSON-RPC) and a2a-go's v0.3 client. Every request writes
// the conversation record once.
func TestTasksOfOneContext(t *testing.T) {
	t.Parallel()
	doorsOf := []struct {
		name string
		open func(*testing.T, *pipetest.Pipeline) taskConv
	}{
		{"a2a-v1-jsonrpc", func(t *testing.T, p *pipetest.Pipeline) taskConv {
			return v1TaskConv{v1Door(a2a.TransportProtocolJSONRPC, true)(t, p, "agent").(*v1Conv)}
		}},
		{"a2a-v03", func(t *testing.T, p *pipetest.Pipeline) taskConv {
			return v03TaskConv{openV03(t, p, "agent").(*v03Conv)}
		}},
	}
	for _, u := range []upstreamKind{
		{"go-jsonrpc", goAgent(up.Options{Binding: up.JSONRPC})},
		{"go-jsonrpc-nostream", goAgent(up.Options{Binding: up.JSONRPC, NoStreaming: true})},
		{"js", jsAgent(jsupstream.Options{})},
		{"js-rest", jsAgent(jsupstream.Options{Binding: up.HTTPJSON})},
		{"js-grpc", jsAgent(jsupstream.Options{Binding: up.GRPC})},
	} {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			a, p := u.bridged(t)
			writes := recordWrites(t, p)
			for _, d := range doorsOf {
				t.Run(d.name, func(t *testing.T) {
					c := d.open(t, p)
					checkTwoTasks(t, a, c, writes, u.name+"/"+d.name)
					checkCancelOneTask(t, a, c, writes, u.name+"/"+d.name)
				})
			}
		})
	}
}

func checkTwoTasks(t *testing.T, a agentUnderTest, c taskConv, writes *writes, tag string) {
	t.Helper()
	send := func(text, taskID, contextID, want string) seen {
		t.Helper()
		c.next(taskID, contextID)
		s := c.send(t, text)
		if s.state != want {
			t.Fatalf("%q: %s %q, want %s", text, s.state, s.text, want)
		}
		writes.check(t, text, 1)
		return s
	}
	ask1, ask2 := "ask: first of "+tag, "ask: second of "+tag
	ans1, ans2 := "Ada of "+tag, "Bob of "+tag
	first := send(ask1, "", "", "input-required")
	second := send(ask2, "", first.contextID, "input-required")
	if second.contextID != first.contextID || second.taskID == first.taskID || second.taskID == "" {
		t.Fatalf("the second task %s in context %s; the first %s in %s", second.taskID, second.contextID, first.taskID, first.contextID)
	}
	if s := send(ans2, second.taskID, second.contextID, "completed"); !strings.Contains(s.text, up.AskReply(ans2)) {
		t.Errorf("the second task's answer: %q, want %q", s.text, up.AskReply(ans2))
	}
	if s := send(ans1, first.taskID, first.contextID, "completed"); !strings.Contains(s.text, up.AskReply(ans1)) {
		t.Errorf("the first task's answer: %q, want %q", s.text, up.AskReply(ans1))
	}
	up1, cont1 := a.task(t, ask1)
	up2, cont2 := a.task(t, ask2)
	if up1 == "" || up2 == "" || up1 == up2 || cont1 || cont2 {
		t.Errorf("upstream tasks: first %q (continued %v), second %q (continued %v); want two new tasks", up1, cont1, up2, cont2)
	}
	if ctx1, ctx2 := a.contextOf(t, ask1), a.contextOf(t, ask2); ctx1 == "" || ctx1 != ctx2 {
		t.Errorf("upstream contexts: first %q, second %q; want one", ctx1, ctx2)
	}
	for _, c := range []struct{ answer, task string }{{ans1, up1}, {ans2, up2}} {
		if got, continued := a.task(t, c.answer); got != c.task || !continued {
			t.Errorf("%q reached upstream task %q (continued %v), want %q", c.answer, got, continued, c.task)
		}
	}
}

func checkCancelOneTask(t *testing.T, a agentUnderTest, c taskConv, writes *writes, tag string) {
	t.Helper()
	ask1, ask2, ans2 := "ask: cancelled of "+tag, "ask: kept of "+tag, "Cy of "+tag
	c.next("", "")
	first := c.send(t, ask1)
	c.next("", first.contextID)
	second := c.send(t, ask2)
	if first.state != "input-required" || second.state != "input-required" || second.contextID != first.contextID {
		t.Fatalf("two questions in one context: %+v, %+v", first, second)
	}
	writes.check(t, "two questions", 2)
	c.cancelTask(t, first.taskID)
	writes.check(t, "the cancel turn", 1)
	up1, _ := a.task(t, ask1)
	up2, _ := a.task(t, ask2)
	if cancels := a.cancels(t); !slices.Contains(cancels, up1) || slices.Contains(cancels, up2) {
		t.Errorf("the agent's cancels %v: want its task %s (cancelled), not %s", cancels, up1, up2)
	}
	c.next(second.taskID, second.contextID)
	if s := c.send(t, ans2); s.state != "completed" || !strings.Contains(s.text, up.AskReply(ans2)) {
		t.Errorf("the kept task's answer: %s %q, want completed with %q", s.state, s.text, up.AskReply(ans2))
	}
	writes.check(t, "the kept task's answer", 1)
	if got, continued := a.task(t, ans2); got != up2 || !continued {
		t.Errorf("%q reached upstream task %q (continued %v), want %q", ans2, got, continued, up2)
	}
}

// TestTakeoverAmongTasks: a worker streaming a task of a context dies;
// before the request is redelivered, another task of the context takes a
// turn (its answer, recorded after the long task's request): the worker
// taking the long task over still finds that task's own upstream task and
// subscribes to it (a2a-go/v2 and @a2a-js/sdk agents): the client's stream
// completes with every chunk exactly once, and the agent ran the long task
// once.
func TestTakeoverAmongTasks(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name  string
		start func(*testing.T) (url string, runs func(t *testing.T, text string) int)
	}{
		{"go-jsonrpc", func(t *testing.T) (string, func(*testing.T, string) int) {
			srv := up.Start(t, up.Options{Binding: up.JSONRPC, SlowInterval: 30 * time.Millisecond, SlowChunks: slowChunks})
			return srv.BaseURL(), func(_ *testing.T, text string) int {
				n := 0
				for _, e := range srv.Executions() {
					if e.Message != nil && up.TextOf(e.Message.Parts) == text {
						n++
					}
				}
				return n
			}
		}},
		{"js", func(t *testing.T) (string, func(*testing.T, string) int) {
			srv := jsupstream.Start(t, jsupstream.Options{SlowInterval: 30 * time.Millisecond, SlowChunks: slowChunks})
			return srv.BaseURL(), func(t *testing.T, text string) int {
				r, err := srv.Record(testCtx(t))
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, e := range r.Executions {
					if e.Text == text {
						n++
					}
				}
				return n
			}
		}},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			url, runs := v.start(t)
			p := pipetest.Start(t)
			tk := &takeover{p: p, events: make(chan a2a.Event, 1024), errs: make(chan error, 1)}
			tk.stopA = tk.worker(t, url)
			c := v1TaskConv{&v1Conv{c: v1Client(t, p, "agent"), stream: true}}
			ask, answer := "ask: beside a long task", "Ada beside a long task"
			first := c.send(t, ask)
			if first.state != "input-required" {
				t.Fatalf("ask: %s", first.state)
			}
			go func() {
				defer close(tk.events)
				msg := userMessage("slow: x")
				msg.ContextID = first.contextID
				for ev, err := range c.c.SendStreamingMessage(testCtx(t), &a2a.SendMessageRequest{Message: msg}) {
					if err != nil {
						tk.errs <- err
						return
					}
					tk.events <- ev
				}
			}()
			turn := up.NewTurn()
			tk.killAfter(t, turn, 1)
			// Worker A is gone: B answers the other task at once, then
			// gets the long task redelivered (after the ack wait).
			tk.worker(t, url)
			c.next(first.taskID, first.contextID)
			if s := c.send(t, answer); s.state != "completed" || !strings.Contains(s.text, up.AskReply(answer)) {
				t.Errorf("the other task's answer: %s %q", s.state, s.text)
			}
			tk.finish(t, turn)
			if got := turn.Text(up.SlowArtifact); got != slowText(slowChunks) || turn.State() != a2a.TaskStateCompleted {
				t.Errorf("after the takeover: %s\n got %q\nwant %q", turn.State(), got, slowText(slowChunks))
			}
			if n := runs(t, "slow: x"); n != 1 {
				t.Errorf("the agent ran the long task %d times, want once (the takeover subscribes to it)", n)
			}
		})
	}
}
