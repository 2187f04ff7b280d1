package a2amap

import "github.com/e2a-pipeline/pipeline/egress"

// ErrInvalidFrame reports a frame that does not decode or breaks the
// ordering invariants; here, an a2a.* frame whose body is not the A2A
// object it names. It is egress.ErrInvalidFrame, the same error.
var ErrInvalidFrame = egress.ErrInvalidFrame
