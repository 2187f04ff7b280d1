package a2abridge_test

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	legacy "github.com/a2aproject/a2a-go/a2a"
	legacysrv "github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/e2a-pipeline/pipeline/e2a"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
)

// slowV03 is the "slow:" scenario as an agent on a2a-go v0.3.15's own
// server (github.com/a2aproject/a2a-go, the SDK v0.3 agents are built
// with): the chunks of artifact "slow", append after the first, every
// interval, then completed.
type slowV03 struct {
	chunks   int
	interval time.Duration
}

func (e slowV03) Execute(ctx context.Context, rc *legacysrv.RequestContext, q eventqueue.Queue) error {
	if rc.StoredTask == nil {
		if err := q.Write(ctx, legacy.NewStatusUpdateEvent(rc, legacy.TaskStateSubmitted, nil)); err != nil {
			return err
		}
	}
	if err := q.Write(ctx, legacy.NewStatusUpdateEvent(rc, legacy.TaskStateWorking, nil)); err != nil {
		return err
	}
	tick := time.NewTicker(e.interval)
	defer tick.Stop()
	for i := 1; i <= e.chunks; i++ {
		ev := legacy.NewArtifactUpdateEvent(rc, legacy.ArtifactID(up.SlowArtifact), legacy.TextPart{Text: up.SlowChunk(i)})
		ev.Append = i > 1
		if err := q.Write(ctx, ev); err != nil {
			return err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	done := legacy.NewStatusUpdateEvent(rc, legacy.TaskStateCompleted, nil)
	done.Final = true
	return q.Write(ctx, done)
}

func (e slowV03) Cancel(ctx context.Context, rc *legacysrv.RequestContext, q eventqueue.Queue) error {
	ev := legacy.NewStatusUpdateEvent(rc, legacy.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// startV03Slow serves slowV03 over JSON-RPC with a v0.3 card, as a
// v0.3-only agent publishes it; it returns the card's base URL.
func startV03Slow(t *testing.T, chunks int, interval time.Duration) string {
	t.Helper()
	return startV03(t, slowV03{chunks: chunks, interval: interval})
}

// TestTakeoverV03AgentWithoutSnapshot: a v0.3 agent on a2a-go v0.3.15's
// server answers tasks/resubscribe with the events that follow the
// subscription only (no task snapshot first). The worker taking the
// request over reads the task with GetTask when the subscription does not
// begin with it, and polls it from there: the chunks the agent sent while
// no worker held the request are written, none twice, and the answer
// completes whole.
func TestTakeoverV03AgentWithoutSnapshot(t *testing.T) {
	t.Parallel()
	url := startV03Slow(t, slowChunks, 30*time.Millisecond)
	tk := startTakeover(t, url)
	turn := up.NewTurn()
	tk.killAfter(t, turn, 3)
	tk.worker(t, url)
	tk.finish(t, turn)
	a := stored(t, tk.p)
	final := a.Final()
	if final == nil || final.ResponseKind != e2a.KindComplete {
		t.Fatalf("the takeover ended the request with %+v", final)
	}
	if got := a.Text(e2a.DeltaText); got != slowText(slowChunks) {
		t.Errorf("stored text after the takeover:\n got %d bytes %q\nwant %d bytes",
			len(got), got, len(slowText(slowChunks)))
	}
	if got := turn.Text(up.SlowArtifact); got != slowText(slowChunks) || turn.State() != a2a.TaskStateCompleted {
		t.Errorf("the client's answer after the takeover: %s, %d bytes, want %d", turn.State(), len(got), len(slowText(slowChunks)))
	}
}
