package agent_test

import (
	"errors"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestRequestCanceller: a request whose worker died mid-stream, cancelled
// while no worker held it, is picked up by another worker: a handler
// implementing agent.RequestCanceller is told (its envelope, a bounded
// context) and the request ends cancelled right after its frames, without
// a Serve call, whether CancelRequest fails or panics. A first delivery
// cancelled before its pick-up started nothing: the handler is not told.
func TestRequestCanceller(t *testing.T) {
	t.Parallel()
	for _, panics := range []bool{false, true} {
		name := "refused"
		if panics {
			name = "panicked"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			pool := "rc-" + name
			env := request("rc-"+name, map[string]any{"frames": 6})
			crashAfter(t, s, pool, env, 2)
			partial, _ := storedFrames(t, s.nc, env.RequestID)
			if _, err := agent.Cancel(tctx(t), s.js, env.RequestID); err != nil {
				t.Fatal(err)
			}
			first := request("rc-first-"+name, nil)
			publish(t, s.js, pool, first)
			if _, err := agent.Cancel(tctx(t), s.js, first.RequestID); err != nil {
				t.Fatal(err)
			}
			h := &canceller{told: make(chan *e2a.Envelope, 2), refuse: errors.New("the work had already ended"), panics: panics}
			startWorker(t, s.connect(t), pool, h, agent.WithAckWait(time.Second))
			checkToldOnce(t, s, h, env, len(partial), first, e2a.ErrCodeCancelled)
		})
	}
}

// TestRequestCancellerDeadline: a request whose worker died mid-stream and
// that is past its deadline when another worker picks it up ends with
// deadline_exceeded; the work the earlier delivery started may still run
// (a bridge's upstream task), so a RequestCanceller handler is told, as
// for a cancel. A first delivery past its deadline started nothing: the
// handler is not told.
func TestRequestCancellerDeadline(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const pool = "rc-deadline"
	env := request("rc-deadline", map[string]any{"frames": 6})
	crashAfter(t, s, pool, env, 2)
	partial, _ := storedFrames(t, s.nc, env.RequestID)
	first := request("rc-deadline-first", nil)
	publish(t, s.js, pool, first)

	h := &canceller{told: make(chan *e2a.Envelope, 2)}
	// Every request stored before now is past a deadline of 1 ns.
	startWorker(t, s.connect(t), pool, h, agent.WithAckWait(time.Second), agent.WithDefaultDeadline(time.Nanosecond))
	checkToldOnce(t, s, h, env, len(partial), first, e2a.ErrCodeDeadlineExceeded)
}

// checkToldOnce checks that env, a redelivery after partial frames, and
// first, a first delivery, end with an e2a.error of code right after
// what they had stored, without a Serve call, and that h's CancelRequest
// was told of env only.
func checkToldOnce(t *testing.T, s *server, h *canceller, env *e2a.Envelope, partial int, first *e2a.Envelope, code string) {
	t.Helper()
	fr := waitFinal(t, s.nc, env.RequestID, 15*time.Second)
	if e, _ := fr[len(fr)-1].Error(); len(fr) != partial+1 || e.Code != code || len(e.Details) != 0 {
		t.Fatalf("%d frames after %d, final %+v", len(fr), partial, e)
	}
	told := testkit.Receive(t, h.told, 5*time.Second, "CancelRequest")
	if told.RequestID != env.RequestID {
		t.Errorf("CancelRequest got %+v", told)
	}
	fr = waitFinal(t, s.nc, first.RequestID, 15*time.Second)
	if e, _ := fr[0].Error(); len(fr) != 1 || e.Code != code {
		t.Fatalf("the first delivery: %d frames, %+v", len(fr), e)
	}
	select {
	case env := <-h.told:
		t.Errorf("CancelRequest told of %s, a first delivery", env.RequestID)
	default:
	}
	if n := h.served.Load(); n != 0 {
		t.Errorf("%d Serve calls, want none", n)
	}
}
