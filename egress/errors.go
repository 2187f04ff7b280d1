package egress

import (
	"errors"
	"fmt"
	"strings"

	"github.com/e2a-pipeline/pipeline/render"
)

// Sentinel errors of the replay engine and the HTTP surface. Functions wrap
// them with detail; test with errors.Is.
var (
	// ErrNotFound reports a request that has no envelope in E2A_REQUESTS and
	// no frame in E2A_RESPONSES: it was never accepted, or it aged out.
	ErrNotFound = errors.New("egress: request not found")
	// ErrFramesExpired reports a request whose frames E2A_RESPONSES no
	// longer holds from the point a read needs, while E2A_REQUESTS may
	// still hold its envelope: the responses stream, many frames per
	// request, drops its oldest first (E2A_RESPONSES_MAX_BYTES with
	// DiscardOld, E2A_RESPONSES_MAX_AGE) and rolls over long before the
	// requests stream. A reader returns it when the first frame it reads of
	// a request lies past its resume point ([Open], [Reader.Next]), or,
	// with the Service's check, when the request was answered (its pool's
	// consumer acknowledged it, which the agent does only once its final
	// frame is stored) and no frame of it is stored. No retry brings the
	// frames back: the read API answers from the History ([WithHistory])
	// when it has the request, else 410 frames_expired, not retryable.
	ErrFramesExpired = errors.New("egress: the request's frames aged out of the hot retention (E2A_RESPONSES)")
	// ErrWaitTimeout reports a request that was accepted but produced no
	// frame within the configured wait (no first frame within MaxWait, or no
	// next frame within IdleTimeout).
	ErrWaitTimeout = errors.New("egress: no frame within the wait limit")
	// ErrSlowClient reports a client that did not accept written bytes within
	// the write timeout; the stream was ended.
	ErrSlowClient = errors.New("egress: slow client")
	// ErrInvalidFrame reports a stored frame that does not decode or breaks
	// the ordering invariants (a gap in the stored sequence): it is
	// render.ErrInvalidFrame, which the renderers report too (an a2a.*
	// frame whose body is not the A2A object it names, an
	// acp.session_update frame whose body is no ACP session update).
	ErrInvalidFrame = render.ErrInvalidFrame
	// ErrBadRequest reports an invalid argument from the client, e.g. a
	// malformed resume point.
	ErrBadRequest = errors.New("egress: bad request")
	// ErrNotCancelable reports a cancel of a request whose final frame was
	// already written.
	ErrNotCancelable = errors.New("egress: request already final")
	// ErrInvalidOption reports an option value New, Open or Replay refuses.
	ErrInvalidOption = errors.New("egress: invalid option")
	// ErrHistoryUnavailable reports a lookup in the audit history
	// ([WithHistory]) that failed, or got no turn or no answer within the
	// history timeout ([WithHistoryLimits]): the request may well be
	// there, so it is answered 503 unavailable, retryable.
	ErrHistoryUnavailable = errors.New("egress: history unavailable")
	// ErrHistoryCorrupt reports a lookup in the audit history that ran
	// into a damaged archive batch (the History's error wraps
	// archive.ErrCorrupt): permanent, answered 500 history_corrupt, not
	// retryable; the batch is logged, never answered.
	ErrHistoryCorrupt = errors.New("egress: the request's audit history is damaged")
	// ErrShuttingDown is the cause with which a server ends its requests'
	// contexts when it shuts down (context.WithCancelCause): a wait for a
	// request's final frame ended by it is answered 503 unavailable,
	// retryable, naming the request, where it was taken for the client
	// gone and answered nothing (an empty 200 the client could not tell
	// from an answer).
	ErrShuttingDown = errors.New("egress: the server is shutting down")
)

// framesExpired is ErrFramesExpired for request id, with detail, naming
// where its audit copy may still be read.
func framesExpired(id, detail string) error {
	return fmt.Errorf("%w: request %q: %s; its audit copy may be read with `e2a replay %s`", ErrFramesExpired, id, detail, id)
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOption, fmt.Sprintf(format, a...))
}

func badRequest(format string, a ...any) error {
	return &clientError{kind: ErrBadRequest, msg: fmt.Sprintf(format, a...)}
}

// clientError is an error of this package that a client caused: its
// Error is the Go chain's text ("egress: bad request: …", wrapping kind),
// its ClientMessage what the client reads (the message alone).
type clientError struct {
	kind error
	msg  string
}

func (e *clientError) Error() string         { return e.kind.Error() + ": " + e.msg }
func (e *clientError) Unwrap() error         { return e.kind }
func (e *clientError) ClientMessage() string { return e.msg }

// ClientMessage is the message a client reads in the error answer for
// err, in any protocol's error shape: the ClientMessage of the first error
// of err's chain that words itself for a client (a normalizer error, a
// malformed resume point of this package's), else err's text without the
// prefixes of the pipeline's packages ("egress: ", "ingress: ", "host: ",
// "subjects: "…), at its start or after a colon. Logs keep err.Error().
func ClientMessage(err error) string {
	var c interface{ ClientMessage() string }
	if errors.As(err, &c) {
		return c.ClientMessage()
	}
	s := err.Error()
	for _, p := range packagePrefixes {
		s = strings.ReplaceAll(strings.TrimPrefix(s, p), ": "+p, ": ")
	}
	return s
}

// packagePrefixes are the prefixes of the errors of the pipeline's
// packages (and encoding/json's) that ClientMessage leaves out.
var packagePrefixes = []string{"egress: ", "ingress: ", "host: ", "subjects: ", "e2a: ", "render: ", "json: ", "push: "}
