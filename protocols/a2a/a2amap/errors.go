package a2amap

import "errors"

// ErrInvalidFrame reports a frame that does not decode or breaks the
// ordering invariants; here, an a2a.* frame whose body is not the A2A
// object it names. It is egress.ErrInvalidFrame, same error and text:
// declared here because this package's mapping reports it and egress
// imports this package, not the other way round.
var ErrInvalidFrame = errors.New("egress: invalid stored frame")
