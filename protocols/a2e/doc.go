// Package a2e is the A2E protocol (a2e-message-protocol.md) as one
// package: its front door (POST /a2e, an NDJSON body of A2E messages
// answered as one NDJSON stream), its answers from a request's frames (the
// A2E renderer: invoke/event lines, then the response or the error line),
// its wire message and its error lines.
//
// Requests are decoded by the normalizer's A2E adapter
// (normalizer.FromA2E, its type registry normalizer.Registry); everything
// else the front door needs from the pipeline (the gate, the publish, the
// answer from frames) comes through a [host.Host], which ingress
// implements and mounts from the registry (protocols.Protocol.Service, a host.RouteServer) with
// [Routes].
//
// Files: message.go (the wire message, constants, error lines),
// render.go (the renderer), frontdoor.go (the handler);
// conformance_test.go runs the renderer through the conformance (package protocols/conformance)
// scenarios against testdata/a2e_ndjson/<scenario>.golden (go test
// ./protocols/a2e -update rewrites them).
package a2e
