package a2abridge_test

import (
	"context"
	"errors"
	"iter"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestStreamCutAfterFrames: the agent's stream is cut (the connection
// dropped, on gRPC the stream ended Unavailable) after the bridge wrote
// some of the answer's text. The bridge's retry cannot run the call again
// (frames were written); the turn subscribes to the agent's task instead
// (SubscribeToTask, once) and writes only what its snapshot holds beyond
// the frames, then follows on: the request completes with the whole
// answer exactly once, and the agent ran one turn. "slow:" is still
// running when the bridge subscribes; "stream:" has likely ended (the
// agent refuses to subscribe to a finished task, and its end is read with
// GetTask).
func TestStreamCutAfterFrames(t *testing.T) {
	t.Parallel()
	const chunks = 10
	for _, v := range []struct {
		name    string
		binding a2a.TransportProtocol
		text    string
		after   int // events through before the cut: task, working, then the answer's
		want    string
	}{
		{"jsonrpc-slow", up.JSONRPC, "slow: x", 4, slowText(chunks)},
		{"grpc-slow", up.GRPC, "slow: x", 4, slowText(chunks)},
		{"rest-slow", up.HTTPJSON, "slow: x", 4, slowText(chunks)},
		{"jsonrpc-stream", up.JSONRPC, "stream: a b c d", 4, up.StreamText("a b c d")},
		{"grpc-stream", up.GRPC, "stream: a b c d", 4, up.StreamText("a b c d")},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			srv := up.Start(t, up.Options{Binding: v.binding, SlowInterval: 30 * time.Millisecond, SlowChunks: chunks,
				Fault: up.Fault{Kind: up.FaultCloseMidEvent, Times: 1, AfterEvents: v.after}})
			p := pipetest.Start(t)
			bridgePool(t, p, "agent", srv.BaseURL())
			a := p.Ask(t, "agent", `{"params":{"text":"`+v.text+`"}}`)
			if got := a.Text(e2a.DeltaText); got != v.want || a.Final().ResponseKind != e2a.KindComplete {
				t.Errorf("answer %q\n  want %q\n final %s", got, v.want, a.Final().Body)
			}
			if srv.Faulted() != 1 {
				t.Errorf("the fault cut %d calls, want 1", srv.Faulted())
			}
			if n, s := len(srv.Executions()), len(srv.CallsOf("SubscribeToTask")); n != 1 || s != 1 {
				t.Errorf("the agent ran %d turns, was subscribed to %d times; want 1 and 1", n, s)
			}
			for i, f := range a.Frames {
				if f.Sequence != int64(i) {
					t.Fatalf("frame %d has sequence %d", i, f.Sequence)
				}
			}
		})
	}
}

// cutAgent answers "one " and "two " as artifact "answer", then a
// working status message of text say (when not ""; twice, the same
// message, when twice), then (once release is closed, when it is not
// nil) "three " and completes (its completed status with that message
// again when final).
type cutAgent struct {
	release      chan struct{}
	say          string
	twice, final bool
}

func (c cutAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	chunk := func(s string, more bool) *a2a.TaskArtifactUpdateEvent {
		ev := a2a.NewArtifactUpdateEvent(ec, "answer", a2a.NewTextPart(s))
		ev.Append, ev.LastChunk = more, !more && s == "three "
		return ev
	}
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) ||
			!yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) ||
			!yield(chunk("one ", false), nil) || !yield(chunk("two ", true), nil) {
			return
		}
		var said, done *a2a.Message
		if c.say != "" {
			said = a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(c.say))
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, said), nil) ||
				c.twice && !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, said), nil) {
				return
			}
		}
		if c.final {
			done = said
		}
		if c.release != nil {
			select {
			case <-c.release:
			case <-ctx.Done():
				return
			}
		}
		_ = yield(chunk("three ", true), nil) && yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, done), nil)
	}
}

func (cutAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// failingStream is a2a-go/v2's request handler whose streams fail after
// their fourth event (a server error: what a2a-go reads of a gRPC stream
// dropped Unavailable), after the execution ended when drain (the events
// in between are not sent). SubscribeToTask is counted, and refused with
// unsupported-operation when refuse (else a2a-go answers it: for a task
// that ended, task-not-found).
type failingStream struct {
	a2asrv.RequestHandler
	drain, refuse bool
	subscribed    *atomic.Int32
}

func (f failingStream) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	inner := f.RequestHandler.SendStreamingMessage(ctx, req)
	return func(yield func(a2a.Event, error) bool) {
		n := 0
		for ev, err := range inner {
			if n++; n <= 4 && !yield(ev, err) {
				return
			}
			if n >= 4 && !f.drain {
				break
			}
		}
		yield(nil, errors.New("stream lost"))
	}
}

func (f failingStream) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	f.subscribed.Add(1)
	if f.refuse {
		return func(yield func(a2a.Event, error) bool) { yield(nil, a2a.ErrUnsupportedOperation) }
	}
	return f.RequestHandler.SubscribeToTask(ctx, req)
}

// TestStreamCutSubscriptionRefused: the agent's stream fails after two
// chunks were written and the agent refuses the subscription that
// follows. A task that ended meanwhile (a2a-go refuses to subscribe to it)
// is read with GetTask and its end written by difference: the request
// completes with the whole answer once. A task that runs on but cannot be
// subscribed to ends the request upstream_cannot_resume, retryable (a
// truthful error: the task is not lost), after its text so far, once.
func TestStreamCutSubscriptionRefused(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name          string
		drain, refuse bool
		want          string
		code          string
	}{
		{"task-ended", true, false, "one two three ", ""},
		{"task-runs-on", false, true, "one two ", bridge.CodeCannotResume},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			var subscribed atomic.Int32
			agent := cutAgent{}
			if !v.drain {
				agent.release = make(chan struct{})
			}
			base := serveA2A(t, failingStream{a2asrv.NewHandler(agent), v.drain, v.refuse, &subscribed})
			if agent.release != nil {
				t.Cleanup(func() { close(agent.release) })
			}
			p := pipetest.Start(t)
			bridgePool(t, p, "agent", base)
			a := p.Ask(t, "agent", `{"params":{"text":"hi"}}`)
			if got := a.Text(e2a.DeltaText); got != v.want {
				t.Errorf("answer %q, want %q", got, v.want)
			}
			code, retryable := a.ErrorCode()
			if code != v.code || (code != "" && !retryable) {
				t.Errorf("final %s: error %q (retryable %v), want %q retryable", a.Final().Body, code, retryable, v.code)
			}
			if n := subscribed.Load(); n != 1 {
				t.Errorf("subscribed %d times, want 1", n)
			}
		})
	}
}
