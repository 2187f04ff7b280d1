package egress

import (
	"fmt"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// What the renderer conformance kit (package protocols/conformance) needs
// of the reader and the service to drive renderers without NATS.

// HeadFrame returns the [Frame] a reader delivers to a [PassThrough]
// renderer for raw, a frame as stored at streamSeq in E2A_RESPONSES: only
// its head read, Response nil until [Frame.Decoded]. Renderers' tests
// outside this package drive their fast paths with it (a decoded frame is
// a Frame with Response set).
func HeadFrame(raw []byte, streamSeq uint64) (*Frame, error) {
	var head headScan
	if err := head.decode(raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidFrame, err)
	}
	if head.Sequence == noSequence {
		head.Sequence = 0 // as when decoding the whole frame
	}
	return &Frame{Raw: raw, StreamSeq: streamSeq, seq: head.Sequence, final: head.IsFinal, rkind: head.ResponseKind, text: head.text}, nil
}

// WrapE2A returns rend, one of E2A's renderers, wrapped as the [Service]
// wraps it for a stream asked with ?projections=true (fill not nil: each
// frame re-encoded with its projections filled by fill, as with
// [WithProjections]) and for the console (redact: each frame's secrets
// replaced, [RedactFrames]), so that tests outside the package drive the
// wrappers too.
func WrapE2A(rend Renderer, fill func(*e2a.Response) *e2a.Response, redact bool) Renderer {
	if fill != nil {
		rend = projecting{rend, fill}
	}
	if redact {
		rend = redacting{rend}
	}
	return rend
}
