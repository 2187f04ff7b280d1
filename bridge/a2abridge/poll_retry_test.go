package a2abridge_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// flakyPoll is a2a-go/v2's request handler whose GetTask fails once (an
// internal error: its task store out for a moment), on the poll after
// the first that showed the task's text, and then lets the agent go on
// (release).
type flakyPoll struct {
	a2asrv.RequestHandler
	release chan struct{}
	polls   *atomic.Int32 // the polls that showed text
}

func (f flakyPoll) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	task, err := f.RequestHandler.GetTask(ctx, req)
	if err != nil || len(task.Artifacts) == 0 {
		return task, err
	}
	if f.polls.Add(1) == 2 {
		close(f.release)
		return nil, errors.New("the task store is out for a moment")
	}
	return task, nil
}

// TestPollFailsOnce: an agent that does not stream fails one GetTask
// (its internal error, retryable) while its task runs, after the bridge
// wrote some of the answer. The Handler cannot run the call again
// (frames were written); the turn polls on, as a stream cut is followed
// on: the request completes with the whole answer, once. It ended
// upstream_unavailable after "one two " while the agent's task ran on.
func TestPollFailsOnce(t *testing.T) {
	t.Parallel()
	agent := cutAgent{release: make(chan struct{})}
	var polls atomic.Int32
	url := serveNoStreaming(t, flakyPoll{a2asrv.NewHandler(agent), agent.release, &polls})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", url)
	a := p.Ask(t, "agent", `{"params":{"text":"hi"}}`)
	if got := a.Text(e2a.DeltaText); got != "one two three " || a.Final().ResponseKind != e2a.KindComplete {
		t.Errorf("answer %q, final %s %s; want %q completed", got, a.Final().ResponseKind, a.Final().Body, "one two three ")
	}
	if polls.Load() < 2 {
		t.Errorf("GetTask showed text %d times: the fault did not fire", polls.Load())
	}
}
