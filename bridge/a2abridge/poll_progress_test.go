package a2abridge_test

import (
	"context"
	"iter"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// foreignSubscriptions is failingStream (its stream cut after the
// agent's "one two ") whose subscriptions yield only an event of another
// task, then end: the turn cannot follow the task by subscribing and
// polls it with GetTask, which are counted.
type foreignSubscriptions struct {
	failingStream
	polls *atomic.Int32
}

func (f foreignSubscriptions) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	f.subscribed.Add(1)
	return func(yield func(a2a.Event, error) bool) {
		other := a2a.TaskInfo{TaskID: "foreign-task", ContextID: "foreign-context"}
		yield(a2a.NewStatusUpdateEvent(other, a2a.TaskStateWorking, nil), nil)
	}
}

func (f foreignSubscriptions) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	f.polls.Add(1)
	return f.failingStream.GetTask(ctx, req)
}

// dripAgent is cutAgent ("one ", "two ") going on with chunks "c0 " …
// one every every, then completed: a task that makes progress.
type dripAgent struct {
	cutAgent
	chunks int
	every  time.Duration
}

func (d dripAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		chunk := func(s string, more bool) *a2a.TaskArtifactUpdateEvent {
			ev := a2a.NewArtifactUpdateEvent(ec, "answer", a2a.NewTextPart(s))
			ev.Append = more
			return ev
		}
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) || !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) ||
			!yield(chunk("one ", false), nil) || !yield(chunk("two ", true), nil) {
			return
		}
		tick := time.NewTicker(d.every)
		defer tick.Stop()
		for i := range d.chunks {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
			if !yield(chunk("c"+string(rune('a'+i))+" ", true), nil) {
				return
			}
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

// TestPollWithoutProgressEnds: after a stream cut, an agent whose
// subscription yields only another task's event is polled (GetTask);
// a task that makes no progress (no new event, state or artifact) for
// 10 idle timeouts (E2A_UPSTREAM_IDLE_TIMEOUT, here 100 ms) ends the request
// upstream_cannot_resume, retryable, after its text so far: it was
// polled every 250 ms without end (~370 polls in 2 minutes) until the
// client gave up. A task that makes progress more often than that is
// polled on past the idle timeout to its end.
func TestPollWithoutProgressEnds(t *testing.T) {
	t.Parallel()
	const idle, poll = 100 * time.Millisecond, 20 * time.Millisecond
	const stall = 10 * idle
	for _, v := range []struct {
		name string
		exec a2asrv.AgentExecutor
		want string
		code string
	}{
		{"stalled", cutAgent{release: make(chan struct{})}, "one two ", bridge.CodeCannotResume},
		// 12 chunks, one each 150 ms: 1.8 s of progress, longer than the stall bound.
		{"progressing", dripAgent{chunks: 12, every: 150 * time.Millisecond}, "one two ca cb cc cd ce cf cg ch ci cj ck cl ", ""},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			if a, ok := v.exec.(cutAgent); ok {
				t.Cleanup(func() { close(a.release) })
			}
			var subscribed, polls atomic.Int32
			base := serveA2A(t, foreignSubscriptions{failingStream{a2asrv.NewHandler(v.exec), false, false, &subscribed}, &polls})
			p := pipetest.Start(t)
			p.Pool("agent", newHandler(t, p, "agent", base, bridge.WithIdleTimeout(idle)))
			start := time.Now()
			a := p.Ask(t, "agent", `{"params":{"text":"hi"}}`)
			took := time.Since(start)
			if got := a.Text(e2a.DeltaText); got != v.want {
				t.Errorf("answer %q, want %q", got, v.want)
			}
			code, retryable := a.ErrorCode()
			if code != v.code || code != "" && !retryable {
				t.Errorf("final %s: error %q (retryable %v), want %q", a.Final().Body, code, retryable, v.code)
			}
			if code != "" && !strings.Contains(string(a.Final().Body), "progress") {
				t.Errorf("final %s does not say the task made no progress", a.Final().Body)
			}
			// The polls are bounded by the idle time (plus the re-subscriptions' waits).
			if n := polls.Load(); v.code != "" && (took > 15*time.Second || n > int32(4*stall/poll)) {
				t.Errorf("ended after %v and %d polls (poll every %v, idle %v)", took, n, poll, idle)
			}
			if subscribed.Load() == 0 || polls.Load() == 0 {
				t.Errorf("subscribed %d times, polled %d times: the test did not reach the polls", subscribed.Load(), polls.Load())
			}
			t.Logf("took %v, %d subscriptions, %d polls", took, subscribed.Load(), polls.Load())
		})
	}
}
