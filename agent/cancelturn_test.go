package agent_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestCancelTurn: a cancel turn (method e2a.MethodCancelTurn) ends
// cancelled at pick-up without a handler call, even when no cancel of it
// was stored (one stored before a worker started can miss it); another
// request of the pool runs.
func TestCancelTurn(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var calls atomic.Int32
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		calls.Add(1)
		return w.Complete(nil)
	})
	startWorker(t, s.connect(t), "cancelturn", h)
	turn := request("turn-1", nil)
	turn.Method = e2a.MethodCancelTurn
	publish(t, s.js, "cancelturn", turn)
	fr := waitFinal(t, s.nc, "turn-1", 10*time.Second)
	if e, _ := fr[0].Error(); len(fr) != 1 || e.Code != e2a.ErrCodeCancelled || calls.Load() != 0 {
		t.Fatalf("%d frames %+v, %d calls", len(fr), e, calls.Load())
	}
	publish(t, s.js, "cancelturn", request("other-1", nil))
	if fr := waitFinal(t, s.nc, "other-1", 10*time.Second); fr[len(fr)-1].ResponseKind != e2a.KindComplete || calls.Load() != 1 {
		t.Fatalf("the next request: %+v, %d calls", fr, calls.Load())
	}
}
