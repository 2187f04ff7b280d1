package a2abridge

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestResumeCancelledWhileReading: a takeover (resume) whose request is
// cancelled while it reads the stored frames, before it follows the
// agent's task, forwards the cancel all the same (CancelTask of the task
// the request recorded): the agent's task does not run on for nobody. It
// was forwarded only once the task was followed.
func TestResumeCancelledWhileReading(t *testing.T) {
	t.Parallel()
	// 1200 chunks 30 ms apart: the agent's task runs for 36 s unless
	// cancelled.
	srv := up.Start(t, up.Options{Binding: up.JSONRPC, SlowInterval: 30 * time.Millisecond, SlowChunks: 1200})
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	var task a2a.TaskID
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("slow: x"))
	for ev, err := range up.Client(t, srv.BaseURL()).SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}) {
		if err != nil {
			t.Fatal(err)
		}
		if task = ev.TaskInfo().TaskID; task != "" {
			break // the agent's execution runs on without the stream
		}
	}

	_, nc := natstest.RunServer(t)
	convs, err := bridge.OpenConversations(ctx, natstest.JetStream(t, nc), streams.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	client, err := bridge.NewClient(srv.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	u, err := New(ctx, client, WithConversations("agent", convs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Close() })
	tn := &turn{u: u, env: &e2a.Envelope{RequestID: "resume-cancelled"}, w: &agenttest.Writer{}, taskID: task}
	// The client's cancel came as the stored frames were read.
	cctx, cancel := context.WithCancelCause(ctx)
	cancel(agent.ErrCancelled)
	if err := tn.resume(cctx, nil, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled resume ended with %v, want the request's end (context.Canceled)", err)
	}
	if !slices.Contains(srv.Cancels(), task) {
		t.Errorf("the agent's task %s was not cancelled (cancels: %v)", task, srv.Cancels())
	}
}
