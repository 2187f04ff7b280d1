package egress

import (
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/render"
)

// What the renderer conformance kit (package protocols/conformance) needs
// of the reader and the service to drive renderers without NATS.

// WrapE2A returns rend, one of E2A's renderers, wrapped as the [Service]
// wraps it for a stream asked with ?projections=true (fill not nil: each
// frame re-encoded with its projections filled by fill, as with
// [WithProjections]) and for the console (redact: each frame's secrets
// replaced, [RedactFrames]), so that tests outside the package drive the
// wrappers too.
func WrapE2A(rend render.Renderer, fill func(*e2a.Response) *e2a.Response, redact bool) render.Renderer {
	if fill != nil {
		rend = projecting{rend, fill}
	}
	if redact {
		rend = redacting{rend}
	}
	return rend
}
