package egress

import (
	"context"
	"errors"
	"net/http"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/render"
)

// APIError is the JSON error body of the E2A HTTP surface:
// {"error":{"code":"…","message":"…","retryable":false}}, the shape ingress
// answers too.
type APIError struct {
	Error APIErrorBody `json:"error"`
}

// APIErrorBody is the inner object of [APIError]. Retryable says whether the
// same call may succeed later (unavailable, timeout).
type APIErrorBody struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// Error codes of the E2A HTTP surface and the HTTP status each maps to.
const (
	CodeNotFound     = "not_found"     // 404
	CodeBadRequest   = "bad_request"   // 400
	CodeTimeout      = "timeout"       // 504
	CodeInvalidFrame = "invalid_frame" // 502
	CodeUnavailable  = "unavailable"   // 503
	CodeCancelled    = "cancelled"     // 499 (client went away)
	CodeInternal     = "internal"      // 500
	CodeNotAccept    = "not_acceptable"
	// CodeNotCancelable: the request already ended (409).
	CodeNotCancelable = "not_cancelable"
	// CodeFramesExpired: the request's frames aged out of the hot
	// retention (E2A_RESPONSES), and no History has a copy (410, not
	// retryable).
	CodeFramesExpired = "frames_expired"
	// CodeHistoryCorrupt: the audit archive's batch that holds the
	// request is damaged (500, not retryable: retrying reads it again).
	CodeHistoryCorrupt = "history_corrupt"
)

// Classify maps an error of this package (or of NATS) to an HTTP status and
// an error code. Ingress uses it to answer in the same shape.
func Classify(err error) (status int, code string) {
	var ne interface{ Timeout() bool }
	switch {
	case err == nil:
		return http.StatusOK, ""
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound, CodeNotFound
	case errors.Is(err, ErrFramesExpired):
		return http.StatusGone, CodeFramesExpired
	case errors.Is(err, ErrHistoryCorrupt):
		return http.StatusInternalServerError, CodeHistoryCorrupt
	case errors.Is(err, ErrHistoryUnavailable), errors.Is(err, ErrShuttingDown):
		return http.StatusServiceUnavailable, CodeUnavailable
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest, CodeBadRequest
	case errors.Is(err, ErrNotCancelable):
		return http.StatusConflict, CodeNotCancelable
	case errors.Is(err, ErrWaitTimeout):
		return http.StatusGatewayTimeout, CodeTimeout
	case errors.Is(err, ErrInvalidFrame):
		return http.StatusBadGateway, CodeInvalidFrame
	case errors.Is(err, context.Canceled):
		return 499, CodeCancelled
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, CodeTimeout
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrDisconnected):
		return http.StatusServiceUnavailable, CodeUnavailable
	case errors.As(err, &ne) && ne.Timeout():
		return http.StatusServiceUnavailable, CodeUnavailable
	}
	return http.StatusInternalServerError, CodeInternal
}

func apiError(err error) (int, APIError) {
	st, code := Classify(err)
	msg := ClientMessage(err)
	if code == CodeNotFound {
		msg = NotFoundMessage // one wording, whatever the cause
	}
	return st, APIError{Error: APIErrorBody{Code: code, Message: msg,
		Retryable: code == CodeUnavailable || code == CodeTimeout}}
}

// NotFoundMessage is the message of every 404 of the E2A HTTP surface (the
// console's included), for an unknown request and for another principal's.
const NotFoundMessage = "request not found"

// WriteError writes err as a JSON error response in the E2A shape.
func WriteError(w http.ResponseWriter, err error) {
	st, body := apiError(err)
	o := render.NewOutput(w, 0)
	_ = o.WriteJSON(st, body)
}
