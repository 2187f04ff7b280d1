package jsupstream

import "errors"

var (
	// ErrInvalidOption is wrapped by New's error for options it cannot
	// serve (a negative interval or count, an unknown binding).
	ErrInvalidOption = errors.New("jsupstream: invalid option")

	// ErrNoNode is wrapped by New's error when no node executable is on
	// the PATH.
	ErrNoNode = errors.New("jsupstream: node not found")
)
