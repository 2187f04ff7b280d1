// Package conformance is the renderer conformance kit every output format
// is checked with: the scenarios built from the specification examples
// ([Scenarios]: text, tool calls, native A2A and ACP frames, the
// interaction spec's cases, errors, cancel, resume, not found, timeout),
// the driver that renders one scenario step by step on a recorded
// response ([Run]: Start, each frame, heartbeats, End, flushing after
// every step), the golden-file comparison ([GoldenPath], [MatchGolden];
// each package's go test -update rewrites its own), the frames the text
// fast paths' differential tests use ([TextFrames], [RenderFrames]), the
// frames of an unreadable A2A event the A2A renderers skip
// ([UnreadableFrames]) and
// the body checks ([NDJSONLines], [SSEData]), and fake pipelines so that
// a protocol package tests its front door without ingress or NATS:
// [Host], a host.Host (admits or refuses, records publishes, holds stream
// slots, serves a request's frames through the package's renderer; the
// tests of protocols/a2e and protocols/e2a), [RPCHost] for JSON-RPC
// sessions (protocols/acp's) and [BindingHost] for an SDK's bindings over
// the task store under the ownership rule (protocols/a2av1's).
//
// egress's own renderers (E2A SSE, NDJSON, JSON) and those of the protocol
// packages (protocols/<name>/conformance_test.go) run through one suite,
// [TestRenderers] (every scenario of every [Case], its golden file, what
// every renderer must write, then the case's own checks), so that one
// scenario reads the same in every protocol; the registry's tests
// (package protocols) fail for a registered protocol without its case or
// golden files. It imports egress (the renderer seam: Renderer, Output,
// Frame, HeadFrame for a frame read without decode) and the frame types,
// and no protocol package (it was egress/conformance.go until issue 39).
package conformance
