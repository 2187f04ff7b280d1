package a2abridge_test

import (
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/agent"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestCancelDuringTakeoverReachesUpstream: worker A streams an agent's
// long task and dies (its connection closed) mid-stream; the client
// cancels the request while no worker holds it; worker B picks the
// redelivery up, finds it cancelled and ends it without calling the agent
// (agent.RequestCanceller). The request ends cancelled, and the cancel
// reaches the agent (CancelTask of the task the request recorded), as it
// does when the worker is alive: the agent's task does not run on for
// nobody.
func TestCancelDuringTakeoverReachesUpstream(t *testing.T) {
	t.Parallel()
	// 1200 chunks 30 ms apart: the agent's task runs for 36 s unless
	// cancelled.
	srv := up.Start(t, up.Options{Binding: up.JSONRPC, SlowInterval: 30 * time.Millisecond, SlowChunks: 1200})
	tk := startTakeover(t, srv.BaseURL())
	turn := up.NewTurn()
	tk.killAfter(t, turn, 3)

	// Worker A is gone: the cancel is stored while no worker holds the
	// request (as ingress's CancelTask stores it).
	id := lastStoredID(t, tk.p)
	if _, err := agent.Cancel(testCtx(t), tk.p.JS, id); err != nil {
		t.Fatal(err)
	}
	tk.worker(t, srv.BaseURL()) // worker B
	tk.finish(t, turn)

	execs := srv.Executions()
	if len(execs) != 1 {
		t.Fatalf("the agent ran %d turns, want 1", len(execs))
	}
	upTask := execs[0].TaskID
	// The request ended cancelled ...
	if turn.State() != a2a.TaskStateCanceled {
		t.Fatalf("the pipeline's task ended %s, want canceled", turn.State())
	}
	// ... and the agent was told.
	testkit.Eventually(t, 10*time.Second, "CancelTask of the agent's task "+string(upTask), func() bool {
		return slices.Contains(srv.Cancels(), upTask)
	})
}
