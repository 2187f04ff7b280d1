package agent_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// canceller is a handler told of cancel turns.
type canceller struct {
	served atomic.Int32
	told   chan *e2a.Envelope
	refuse error
}

var _ agent.TurnCanceller = (*canceller)(nil)

func (c *canceller) Serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	c.served.Add(1)
	return w.Complete(nil)
}

func (c *canceller) CancelTurn(ctx context.Context, env *e2a.Envelope) error {
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("no deadline")
	}
	c.told <- env
	return c.refuse
}

// TestTurnCanceller: a handler implementing agent.TurnCanceller is told of
// a cancel turn (its envelope) and the turn still ends cancelled without a
// Serve call; the final frame's details say whether the handler took the
// cancel or refused it (with its message).
func TestTurnCanceller(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for _, tc := range []struct {
		name   string
		refuse error
		want   map[string]any
	}{
		{"done", nil, map[string]any{"handler_cancel": "done"}},
		{"refused", errors.New("task is not cancelable"),
			map[string]any{"handler_cancel": "refused", "handler_cancel_error": "task is not cancelable"}},
	} {
		h := &canceller{told: make(chan *e2a.Envelope, 1), refuse: tc.refuse}
		pool := "tc-" + tc.name
		startWorker(t, s.connect(t), pool, h)
		turn := request("turn-"+tc.name, nil)
		turn.Method, turn.ContextID = e2a.MethodCancelTurn, "ctx-"+tc.name
		publish(t, s.js, pool, turn)
		fr := waitFinal(t, s.nc, "turn-"+tc.name, 10*time.Second)
		e, _ := fr[len(fr)-1].Error()
		if len(fr) != 1 || e.Code != e2a.ErrCodeCancelled || h.served.Load() != 0 {
			t.Fatalf("%s: %d frames %+v, %d Serve calls", tc.name, len(fr), e, h.served.Load())
		}
		if len(e.Details) != len(tc.want) {
			t.Errorf("%s: details %v, want %v", tc.name, e.Details, tc.want)
		}
		for k, v := range tc.want {
			if e.Details[k] != v {
				t.Errorf("%s: details %v, want %v", tc.name, e.Details, tc.want)
			}
		}
		select {
		case env := <-h.told:
			if env.RequestID != "turn-"+tc.name || env.ContextID != "ctx-"+tc.name || env.Method != e2a.MethodCancelTurn {
				t.Errorf("%s: CancelTurn got %+v", tc.name, env)
			}
		default:
			t.Errorf("%s: CancelTurn not called", tc.name)
		}
	}
}
