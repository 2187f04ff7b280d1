package httpagent

import "errors"

// Sentinel errors: the causes (bridge.Error.Err) of the upstream errors a
// call ends with; test with errors.Is. Options refuse bad values with
// errors wrapping bridge.ErrInvalidOption.
var (
	// ErrBadFrame: a line, event or JSON answer is not an E2A frame as the
	// package documentation defines it (code upstream_protocol_error).
	ErrBadFrame = errors.New("httpagent: upstream answer is not an E2A frame")
	// ErrFrameTooLarge: a line, event or JSON answer is larger than the
	// frame bound (code upstream_protocol_error).
	ErrFrameTooLarge = errors.New("httpagent: upstream frame larger than the bound")
	// ErrTooManyFrames: the answer holds more frames than the bound
	// (code upstream_protocol_error).
	ErrTooManyFrames = errors.New("httpagent: upstream answer has too many frames")
	// ErrContentType: a 2xx answer is neither NDJSON, SSE nor JSON (code
	// upstream_protocol_error).
	ErrContentType = errors.New("httpagent: upstream answer has an unknown content type")
	// ErrNoFinalFrame: the answer ended before its final frame (code
	// upstream_unavailable, retryable, when the connection may have cut
	// it; upstream_protocol_error, not retryable, when the agent ended its
	// body itself: its length reached, its last chunk sent).
	ErrNoFinalFrame = errors.New("httpagent: upstream answer ended without a final frame")
)
