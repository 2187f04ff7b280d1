package e2a

import "errors"

// Sentinel errors. Functions wrap them with detail; test with errors.Is.
var (
	// ErrInvalidJSON reports input that is not a JSON object.
	ErrInvalidJSON = errors.New("e2a: invalid JSON")
	// ErrInvalidEnvelope reports an envelope that breaks the specification.
	ErrInvalidEnvelope = errors.New("e2a: invalid envelope")
	// ErrInvalidResponse reports a response frame that breaks §12.4.
	ErrInvalidResponse = errors.New("e2a: invalid response")
	// ErrFrameSequence reports frames that break the invariants of §12.3.
	ErrFrameSequence = errors.New("e2a: frame sequence violation")
	// ErrInvalidBurst reports a stored response message whose frame count
	// (its E2A-Frames header) or payload does not make a burst of frames.
	ErrInvalidBurst = errors.New("e2a: invalid frame burst")
)
