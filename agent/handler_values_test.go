package agent_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// opError is an error type as os.PathError is: its methods read the
// pointer's fields, so a typed nil of it (a function returning a nil
// *opError, returned as an error) panics in Error and Unwrap.
type opError struct {
	op  string
	err error
}

func (e *opError) Error() string { return e.op + ": " + e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

// lookUp returns no *opError: as an error, a typed nil (not nil).
func lookUp() *opError { return nil }

// badJSON is a value whose MarshalJSON panics (it reads a nil pointer).
type badJSON struct{ n *int }

func (b badJSON) MarshalJSON() ([]byte, error) { return []byte(strconv.Itoa(*b.n)), nil }

// inChild runs child in a child process of the test binary, where a panic
// not recovered ends the child (and would end the worker's process)
// instead of this run; the test fails unless the child passes.
func inChild(t *testing.T, child func(t *testing.T)) {
	t.Helper()
	if os.Getenv(childTestEnv) == t.Name() {
		child(t)
		return
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childTestEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		if len(out) > 4000 {
			out = out[len(out)-4000:]
		}
		t.Fatalf("the worker's process: %v\n%s", err, out)
	}
}

// A handler returning a typed nil error of its own type (whose Error and
// Unwrap dereference the nil receiver) ends its request with e2a.error
// handler_error, and the worker keeps serving: the runtime read the error
// (errors.As, Error) on the delivery's goroutine, unrecovered, and the
// process died, as every worker the request was redelivered to did.
func TestHandlerTypedNilErrorEndsRequest(t *testing.T) {
	inChild(t, func(t *testing.T) {
		s := startServer(t)
		h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
			if env.RequestID == "tnil-2" {
				return w.Complete("served")
			}
			var err error = lookUp()
			return err
		})
		startWorker(t, s.connect(t), "tnil", h, agent.WithConcurrency(1))
		waitConsumer(t, s.js, "tnil")
		publish(t, s.js, "tnil", request("tnil-1", nil))
		fr := waitFinal(t, s.nc, "tnil-1", 10*time.Second)
		e, err := fr[len(fr)-1].Error()
		if err != nil || len(fr) != 1 || e.Code != e2a.ErrCodeHandlerError || e.Message == "" || e.Retryable {
			t.Fatalf("%d frames, final %+v (%v); want one e2a.error handler_error", len(fr), e, err)
		}
		publish(t, s.js, "tnil", request("tnil-2", nil))
		if fr := waitFinal(t, s.nc, "tnil-2", 10*time.Second); fr[len(fr)-1].ResponseKind != e2a.KindComplete {
			t.Fatalf("next request: final %s", fr[len(fr)-1].ResponseKind)
		}
	})
}

// A TurnCanceller whose CancelTurn returns a typed nil error of its own
// type ends the cancel turn cancelled, the call recorded as refused: the
// runtime read the error on the delivery's goroutine and the process died.
func TestTurnCancellerTypedNilError(t *testing.T) {
	inChild(t, func(t *testing.T) {
		s := startServer(t)
		h := &canceller{told: make(chan *e2a.Envelope, 1), refuse: error(lookUp())}
		startWorker(t, s.connect(t), "tcnil", h, agent.WithConcurrency(1))
		waitConsumer(t, s.js, "tcnil")
		turn := request("tcnil-turn", nil)
		turn.Method, turn.ContextID = e2a.MethodCancelTurn, "ctx-tcnil"
		publish(t, s.js, "tcnil", turn)
		fr := waitFinal(t, s.nc, "tcnil-turn", 10*time.Second)
		e, _ := fr[len(fr)-1].Error()
		if len(fr) != 1 || e.Code != e2a.ErrCodeCancelled || e.Details["handler_cancel"] != "refused" || e.Details["handler_cancel_error"] == "" {
			t.Fatalf("cancel turn: %d frames, final %+v; want e2a.error cancelled, handler_cancel refused with a message", len(fr), e)
		}
		publish(t, s.js, "tcnil", request("tcnil-next", nil))
		if fr := waitFinal(t, s.nc, "tcnil-next", 10*time.Second); fr[len(fr)-1].ResponseKind != e2a.KindComplete {
			t.Fatalf("next request: final %s", fr[len(fr)-1].ResponseKind)
		}
	})
}

// A handler's *Error whose Details panic when encoded (a MarshalJSON of
// the handler's) ends the request as Details that do not encode do: the
// handler's code and message, without the details. The runtime encoded
// them on the delivery's goroutine, unrecovered, and the process died.
func TestHandlerErrorDetailsEncodingPanics(t *testing.T) {
	inChild(t, func(t *testing.T) {
		s := startServer(t)
		h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
			return &agent.Error{Code: "scoring_failed", Message: "bad score", Retryable: true,
				Details: map[string]any{"score": badJSON{}}}
		})
		startWorker(t, s.connect(t), "dpanic", h, agent.WithConcurrency(1))
		waitConsumer(t, s.js, "dpanic")
		publish(t, s.js, "dpanic", request("dpanic-1", nil))
		fr := waitFinal(t, s.nc, "dpanic-1", 10*time.Second)
		e, err := fr[len(fr)-1].Error()
		if err != nil || len(fr) != 1 || e.Code != "scoring_failed" || e.Message != "bad score" || !e.Retryable || len(e.Details) != 0 {
			t.Fatalf("%d frames, final %+v (%v); want the handler's error without its details", len(fr), e, err)
		}
	})
}

// A delta whose encoding panics (a MarshalJSON of the handler's), written
// after coalesced text (held, or written while a frame was in flight), is
// refused as one that does not encode: the text is stored, and the
// request goes on to its final frame. The panic unwound through the
// writer in the middle of queueing the text: the text stayed queued with
// nothing to publish it, and the request never ended (its final frame
// waited for it, its delivery kept by heartbeats).
func TestDeltaEncodingPanicRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	got := make(chan error, 1)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		agent.Hold(w, true)
		if err := w.Chunk(e2a.DeltaText, "before"); err != nil {
			return err
		}
		got <- w.Chunk(e2a.DeltaTool, badJSON{})
		return w.Complete("after")
	})
	startWorker(t, s.connect(t), "epanic", h, agent.WithConcurrency(1), agent.WithDrainTimeout(time.Second))
	waitConsumer(t, s.js, "epanic")
	publish(t, s.js, "epanic", request("epanic-1", nil))
	err := testkit.Receive(t, got, 10*time.Second, "the delta's Chunk")
	if err == nil || errors.Is(err, agent.ErrWriterClosed) {
		t.Fatalf("Chunk of a delta whose encoding panics: %v, want the encoding's error", err)
	}
	fr := waitFinal(t, s.nc, "epanic-1", 10*time.Second)
	if len(fr) != 2 || text(t, fr) != "before" || fr[1].ResponseKind != e2a.KindComplete {
		t.Fatalf("%d frames (text %q, final %s); want the text, then e2a.complete", len(fr), text(t, fr), fr[len(fr)-1].ResponseKind)
	}
}
