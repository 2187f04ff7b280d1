package a2abridge_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestCutAtEveryEvent: the agent's stream is cut after each number
// of its events in turn, on v1.0 and v0.3 JSON-RPC; the A2A client of the
// pipeline gets, streamed and from tasks/get, what an uncut answer gives
// (text once, thoughts once, the data part once, the artifacts' and parts'
// metadata), and the E2A frames hold the text and reasoning once.
func TestCutAtEveryEvent(t *testing.T) {
	t.Parallel()
	for _, v03 := range []bool{false, true} {
		for _, scenario := range []string{up.Stream, up.ArtifactMeta} {
			for after := 1; after <= 7; after++ {
				name := fmt.Sprintf("v03=%v/%s/%d", v03, scenario, after)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					srv := up.Start(t, up.Options{Binding: up.JSONRPC, V03: v03,
						Fault: up.Fault{Kind: up.FaultCloseMidEvent, Times: 1, AfterEvents: after}})
					p := pipetest.Start(t)
					bridgePool(t, p, "agent", srv.BaseURL())
					text := scenario + ": cut " + fmt.Sprint(after)
					c := v1Client(t, p, "agent")
					turn := up.Collect(t, c.SendStreamingMessage(context.Background(), up.Msg(text)), nil)
					if err := checkA2A(turn, text); err != nil {
						t.Errorf("stream: %v", err)
					}
					if turn.Task.TaskID != "" {
						task, err := c.GetTask(testCtx(t), &a2a.GetTaskRequest{ID: turn.Task.TaskID})
						if err != nil {
							t.Fatalf("GetTask: %v", err)
						}
						got := up.NewTurn()
						got.Add(task)
						if err := checkA2A(got, text); err != nil {
							t.Errorf("tasks/get: %v", err)
						}
					}
					if err := srv.SetFault(up.Fault{Kind: up.FaultCloseMidEvent, Times: 1, AfterEvents: after}); err != nil {
						t.Fatal(err)
					}
					text += " e2a"
					_, body := up.Scenario(text)
					a := p.Ask(t, "agent", `{"params":{"text":"`+text+`"}}`)
					if a.Final() == nil || a.Final().ResponseKind != e2a.KindComplete {
						t.Fatalf("final %+v", a.Final())
					}
					wantText, wantThought := up.StreamText(body), up.Thought(body)
					if scenario == up.ArtifactMeta {
						wantText, wantThought = up.MetaText(body), ""
					}
					if got := a.Text(e2a.DeltaText); got != wantText {
						t.Errorf("E2A text %q, want %q", got, wantText)
					}
					if got := a.Text(e2a.DeltaReasoning); got != wantThought {
						t.Errorf("E2A reasoning %q, want %q", got, wantThought)
					}
				})
			}
		}
	}
}

// checkA2A checks what an A2A client of the pipeline got of scenario
// text: "artifact-meta:" whole (up.Turn.Check); "stream:"'s text artifact
// and its one data part (the pipeline keeps the thoughts apart).
func checkA2A(turn *up.Turn, text string) error {
	name, body := up.Scenario(text)
	if name != up.Stream {
		return turn.Check(text, false)
	}
	if got := turn.Text(up.TextArtifact); got != up.StreamText(body) {
		return fmt.Errorf("text artifact %q, want %q", got, up.StreamText(body))
	}
	if d := turn.Artifacts[up.DataArtifact]; d == nil || len(d.Parts) != 1 {
		return fmt.Errorf("data artifact %+v, want one part", d)
	}
	return nil
}

// TestCutStatusMessageInGap: a working status message ("meanwhile ") the
// agent sends while the bridge's stream is cut is written, once, as the
// agent's status-update among the answer's text, as it is uncut ("one two meanwhile three
// "): whether the task's history holds it when the bridge reads the task
// again (history: the agent ended in the gap, GetTask) or it is the
// task's status then (status: the subscription's first event); an agent
// polled with GetTask (polled) gets its status messages written so too,
// once each, in an order the polls do not fix.
func TestCutStatusMessageInGap(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"uncut", "history", "status", "polled"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			var subscribed atomic.Int32
			agent := cutAgent{say: "meanwhile "}
			var base string
			switch v {
			case "uncut":
				base = serveA2A(t, a2asrv.NewHandler(agent))
			case "history":
				base = serveA2A(t, failingStream{a2asrv.NewHandler(agent), true, false, &subscribed})
			case "status":
				agent.release = make(chan struct{})
				h := a2asrv.NewHandler(agent)
				base = serveA2A(t, statusHeld{failingStream{h, false, false, &subscribed}, agent.release, new(sync.Once), false})
			case "polled":
				base = serveNoStreaming(t, a2asrv.NewHandler(agent))
			}
			p := pipetest.Start(t)
			bridgePool(t, p, "agent", base)
			a := p.Ask(t, "agent", `{"params":{"text":"hi"}}`)
			if got := a.Text(e2a.DeltaText); got != "one two three " {
				t.Errorf("the answer's text %q, want the artifact's alone", got)
			}
			got, want := saidText(t, a.Frames), "one two meanwhile three "
			if v == "polled" {
				// The polls do not say where the message came among the
				// artifact's chunks.
				if n := strings.Count(got, "meanwhile "); n != 1 {
					t.Errorf("answer %q: the status message %d times, want once", got, n)
				}
				got, want = strings.Replace(got, "meanwhile ", "", 1), "one two three "
			}
			if got != want {
				t.Errorf("answer and status messages %q, want %q", saidText(t, a.Frames), want)
			}
			if f := a.Final(); f == nil || f.ResponseKind != e2a.KindComplete {
				t.Fatalf("final %+v", f)
			}
			if n, cut := subscribed.Load(), v == "history" || v == "status"; cut && n != 1 || !cut && n != 0 {
				t.Errorf("subscribed %d times", n)
			}
		})
	}
}

// statusHeld is a request handler (failingStream, or a2a-go/v2's own)
// whose subscription is answered once the task's status holds the
// agent's message (the agent waits on release after it), and lets the
// agent go on (release) once the subscription's first event, the task
// as it stands, is sent: the message is the task's status in that
// event, not in its history nor an event after. When replay, the task's
// status follows that first event as a status-update (an upstream that
// replays its status on a subscription: the same message again).
type statusHeld struct {
	a2asrv.RequestHandler
	release chan struct{}
	once    *sync.Once
	replay  bool
}

func (s statusHeld) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	said := testkit.Until(10*time.Second, func() bool {
		task, err := s.GetTask(ctx, &a2a.GetTaskRequest{ID: req.ID})
		return err == nil && task.Status.Message != nil
	})
	inner := s.RequestHandler.SubscribeToTask(ctx, req)
	return func(yield func(a2a.Event, error) bool) {
		if !said {
			yield(nil, errors.New("the agent's status message never came"))
			return
		}
		first := true
		for ev, err := range inner {
			if !yield(ev, err) {
				return
			}
			if first {
				first = false
				if task, ok := ev.(*a2a.Task); ok && s.replay &&
					!yield(&a2a.TaskStatusUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, Status: task.Status}, nil) {
					return
				}
				s.once.Do(func() { close(s.release) })
			}
		}
	}
}

// mixedAgent answers one artifact of text and thoughts interleaved, each
// part with metadata of its own; failingStream cuts it after "hmm ".
type mixedAgent struct{ cutAgent }

func (mixedAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	part := func(s string, thought bool) *a2a.TaskArtifactUpdateEvent {
		p := a2a.NewTextPart(s)
		p.Metadata = map[string]any{"n": s}
		if thought {
			p.Metadata["thought"] = true
		}
		ev := a2a.NewArtifactUpdateEvent(ec, "answer", p)
		ev.Append = s != "one "
		return ev
	}
	return func(yield func(a2a.Event, error) bool) {
		_ = yield(a2a.NewSubmittedTask(ec, ec.Message), nil) &&
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) &&
			yield(part("one ", false), nil) && yield(part("hmm ", true), nil) &&
			yield(part("two ", false), nil) && yield(part("more ", true), nil) && yield(part("three ", false), nil) &&
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

// TestCutMixedArtifact: an artifact of text and reasoning parts cut
// in the middle is written once, text and reasoning each.
func TestCutMixedArtifact(t *testing.T) {
	t.Parallel()
	var subscribed atomic.Int32
	base := serveA2A(t, failingStream{a2asrv.NewHandler(mixedAgent{}), true, false, &subscribed})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", base)
	a := p.Ask(t, "agent", `{"params":{"text":"hi"}}`)
	if got, want := a.Text(e2a.DeltaText), "one two three "; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	if got, want := a.Text(e2a.DeltaReasoning), "hmm more "; got != want {
		t.Errorf("reasoning %q, want %q", got, want)
	}
	if a.Final().ResponseKind != e2a.KindComplete {
		t.Errorf("final %s", a.Final().Body)
	}
}

// TestStreamCutProgressRenewsBudget: a long answer whose stream is cut
// again and again (a proxy's idle timeout), each subscription cut after
// its third event, completes whole and once: a re-subscription that wrote
// some of the answer renews the budget of 3, which the 4 cuts after the
// first would otherwise spend (upstream_unavailable).
func TestStreamCutProgressRenewsBudget(t *testing.T) {
	t.Parallel()
	const chunks, cuts = 40, 5
	srv := up.Start(t, up.Options{Binding: up.JSONRPC, SlowInterval: 30 * time.Millisecond, SlowChunks: chunks,
		Fault: up.Fault{Kind: up.FaultCloseMidEvent, Times: cuts, AfterEvents: 3}})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", srv.BaseURL())
	a := p.Ask(t, "agent", `{"params":{"text":"slow: x"}}`)
	if got, want := a.Text(e2a.DeltaText), slowText(chunks); got != want || a.Final().ResponseKind != e2a.KindComplete {
		t.Errorf("answer %q\n  want %q\n final %s", got, want, a.Final().Body)
	}
	if n, s := srv.Faulted(), len(srv.CallsOf("SubscribeToTask")); n != cuts || s != cuts {
		t.Errorf("the fault cut %d calls, the agent was subscribed to %d times; want %d and %d", n, s, cuts, cuts)
	}
}

// cutSubscriptions is failingStream whose subscriptions are cut too,
// each after its first event (the task as it stands).
type cutSubscriptions struct{ failingStream }

func (c cutSubscriptions) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	inner := c.failingStream.SubscribeToTask(ctx, req)
	return func(yield func(a2a.Event, error) bool) {
		for ev, err := range inner {
			if !yield(ev, err) || err != nil {
				return
			}
			break
		}
		yield(nil, errors.New("stream lost"))
	}
}

// TestStreamCutWithoutProgressEnds: a task that stalls, each of whose
// subscriptions is cut after the task as it stands (nothing new to
// write), is subscribed to 3 times, then the request ends with the text
// so far and the cut's error, retryable: the budget is renewed only by
// progress.
func TestStreamCutWithoutProgressEnds(t *testing.T) {
	t.Parallel()
	var subscribed atomic.Int32
	agent := cutAgent{release: make(chan struct{})}
	t.Cleanup(func() { close(agent.release) })
	base := serveA2A(t, cutSubscriptions{failingStream{a2asrv.NewHandler(agent), false, false, &subscribed}})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", base)
	a := p.Ask(t, "agent", `{"params":{"text":"hi"}}`)
	if got, want := a.Text(e2a.DeltaText), "one two "; got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
	if code, retryable := a.ErrorCode(); code != bridge.CodeUnavailable || !retryable {
		t.Errorf("final %s: error %q (retryable %v), want %q retryable", a.Final().Body, code, retryable, bridge.CodeUnavailable)
	}
	if n := subscribed.Load(); n != 3 {
		t.Errorf("subscribed %d times, want 3", n)
	}
}
