package agent_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// canceller is a handler told of cancel turns (agent.TurnCanceller) and
// of the requests cancelled at a redelivery's pick-up
// (agent.RequestCanceller): either call checks that its context has a
// deadline, sends the envelope on told, then panics when panics is set,
// or returns refuse.
type canceller struct {
	served atomic.Int32
	told   chan *e2a.Envelope
	refuse error
	panics bool
}

var (
	_ agent.TurnCanceller    = (*canceller)(nil)
	_ agent.RequestCanceller = (*canceller)(nil)
)

func (c *canceller) Serve(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	c.served.Add(1)
	return w.Complete(nil)
}

func (c *canceller) CancelTurn(ctx context.Context, env *e2a.Envelope) error {
	return c.tell(ctx, env, "CancelTurn")
}

func (c *canceller) CancelRequest(ctx context.Context, env *e2a.Envelope) error {
	return c.tell(ctx, env, "CancelRequest")
}

func (c *canceller) tell(ctx context.Context, env *e2a.Envelope, call string) error {
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("no deadline")
	}
	c.told <- env
	if c.panics {
		panic("boom in " + call)
	}
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

// childTestEnv names the test a child process of the test binary runs.
const childTestEnv = "E2A_AGENT_CHILD_TEST"

// A panic in TurnCanceller.CancelTurn is the handler's failure, not the
// process's: the cancel turn still ends cancelled (details
// "handler_cancel": "panicked", the panic logged with its stack), without a
// Serve call, and the worker keeps serving. The worker runs in a child
// process of the test binary, where a panic not recovered ends the child
// (it would end every worker the cancel turn is redelivered to) instead of
// this run.
func TestTurnCancellerPanic(t *testing.T) {
	inChild(t, turnCancellerPanicChild)
}

func turnCancellerPanicChild(t *testing.T) {
	s := startServer(t)
	var logs testkit.Buffer
	h := &canceller{told: make(chan *e2a.Envelope, 1), panics: true}
	startWorker(t, s.connect(t), "tcpanic", h, agent.WithConcurrency(1),
		agent.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	waitConsumer(t, s.js, "tcpanic")
	turn := request("tcpanic-turn", nil)
	turn.Method, turn.ContextID = e2a.MethodCancelTurn, "ctx-tcpanic"
	publish(t, s.js, "tcpanic", turn)
	fr := waitFinal(t, s.nc, "tcpanic-turn", 10*time.Second)
	e, _ := fr[len(fr)-1].Error()
	if len(fr) != 1 || e.Code != e2a.ErrCodeCancelled || len(e.Details) != 1 || e.Details["handler_cancel"] != "panicked" {
		t.Fatalf("cancel turn: %d frames, final %+v; want one e2a.error cancelled, details handler_cancel: panicked", len(fr), e)
	}
	if l := logs.String(); !strings.Contains(l, "boom in CancelTurn") || !strings.Contains(l, "(*canceller).CancelTurn") {
		t.Errorf("the panic is not logged with its stack:\n%s", l)
	}
	// The process keeps serving.
	publish(t, s.js, "tcpanic", request("tcpanic-next", nil))
	fr = waitFinal(t, s.nc, "tcpanic-next", 10*time.Second)
	if last := fr[len(fr)-1]; last.ResponseKind != e2a.KindComplete || h.served.Load() != 1 {
		t.Fatalf("next request: final %s, %d Serve calls; want e2a.complete, 1", last.ResponseKind, h.served.Load())
	}
}
