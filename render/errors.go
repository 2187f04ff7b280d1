package render

import "errors"

// Sentinel errors of the toolkit; functions wrap them with detail (test
// with errors.Is).
var (
	// ErrInvalidFrame reports a stored frame that does not decode
	// ([Frame.Decoded], [HeadFrame]) or that a renderer cannot render (an
	// a2a.* frame whose body is not the A2A object it names, an
	// acp.session_update frame whose body is no ACP session update). The
	// reader (package egress) reports the frames that break the ordering
	// invariants with it too: egress.ErrInvalidFrame is this error. Its
	// text names egress, the stage that reads the frames, as clients have
	// always seen it.
	ErrInvalidFrame = errors.New("egress: invalid stored frame")
)
