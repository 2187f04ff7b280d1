package agent

import (
	"errors"
	"fmt"
)

// Sentinel errors. Functions wrap them with detail; test with errors.Is.
var (
	// ErrInvalidOption reports an option value Run refuses.
	ErrInvalidOption = errors.New("agent: invalid option")
	// ErrFenced is returned by a Writer once another worker has written a
	// frame of the request: this worker's delivery is stale and it must stop.
	// The runtime cancels the handler's context with this cause.
	ErrFenced = errors.New("agent: fenced out, another worker owns the request")
	// ErrFinalWritten is returned by a Writer asked to write after the final
	// frame.
	ErrFinalWritten = errors.New("agent: final frame already written")
	// ErrWriterClosed is returned by a Writer after the runtime took the
	// request back from the handler (cancel, deadline, shutdown) or the
	// handler returned (a goroutine it left writing).
	ErrWriterClosed = errors.New("agent: writer closed")
	// ErrCancelled is the cause of a handler context cancelled by a cancel
	// on the request's control subject.
	ErrCancelled = errors.New("agent: request cancelled")
	// ErrDeadlineExceeded is the cause of a handler context whose request
	// deadline passed.
	ErrDeadlineExceeded = errors.New("agent: request deadline exceeded")
	// ErrShutdown is the cause of a handler context cancelled because the
	// worker is shutting down and the drain timeout passed; the request is
	// handed back to the pool.
	ErrShutdown = errors.New("agent: worker shutting down")
	// ErrFrameTooLarge is returned by a Writer for a frame whose encoding
	// and headers exceed the NATS server's max_payload: it is refused at
	// once, nothing is published and the writer stays usable. Text and
	// reasoning deltas of Chunk are split into frames that fit instead. The
	// error is also an *Error (errors.As) with code frame_too_large, so a
	// handler that returns it ends the request with that e2a.error frame.
	ErrFrameTooLarge = errors.New("agent: frame larger than the server's max_payload")
)

// Error is an error a handler may return to choose the e2a.error frame the
// runtime writes for it: its code, message and whether the client may retry
// (as Fail: an empty code is handler_error, an empty message the code).
// Any other error becomes code handler_error, retryable false.
type Error struct {
	Code      string
	Message   string
	Retryable bool
	Details   map[string]any
}

// Error formats the code and message. A nil *Error (a handler returning a
// typed nil) formats as such rather than panic in the runtime.
func (e *Error) Error() string {
	if e == nil {
		return "agent: nil *agent.Error"
	}
	return fmt.Sprintf("agent: %s: %s", e.Code, e.Message)
}

// Errorf returns an *Error with code and a formatted message.
func Errorf(code string, retryable bool, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Retryable: retryable}
}

// fencedError is ErrFenced with what the response subject held when the
// conflict was seen.
type fencedError struct {
	lastSeq   int64 // sequence of the frame found, -1 when unknown
	lastFinal bool  // the frame found is final
}

func (e *fencedError) Error() string {
	if e.lastFinal {
		return fmt.Sprintf("%v (final frame %d already written)", ErrFenced, e.lastSeq)
	}
	return fmt.Sprintf("%v (frame %d written by another worker)", ErrFenced, e.lastSeq)
}

func (e *fencedError) Unwrap() error { return ErrFenced }

// evictedError is the failure of a publish whose expected last subject
// sequence named a message of this writer's that the response subject no
// longer holds, the subject left empty: the stream dropped the request's
// frames (E2A_RESPONSES's limits, DiscardOld), not another worker, which
// would have left its own. seq is the frame that could not be written.
type evictedError struct {
	seq int64
}

func (e *evictedError) Error() string {
	return fmt.Sprintf("agent: the stream dropped the request's stored frames (E2A_RESPONSES limits) before frame %d was written", e.seq)
}
