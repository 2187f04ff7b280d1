// Package e2a is the front door of E2A, the pipeline's own protocol
// (specs/e2a-protocol.md): POST /v1/requests, an E2A envelope or a legacy
// AgentRequest, accepted with 202 and links, or answered at once as a
// stream (Accept: text/event-stream or application/x-ndjson) or as the
// request's JSON view (?wait=true).
//
// Requests are decoded by the normalizer's E2A adapter
// (normalizer.FromE2A); the gate, the publish, the caller's stream slot and
// the answer come through a [host.Host], which ingress implements and
// mounts from the registry (protocols.Protocol.Service, a host.RouteServer) with [Routes].
//
// The answers are egress's own ([host.Answerer.ServeE2A]): E2A is the
// format frames are stored in, and egress serves it without ingress (GET
// /v1/requests/{id}, …/stream on an egress-only worker), so its renderers
// (SSE, NDJSON, the JSON view), their conformance cases and golden files
// stay in egress, where the read side of the same API lives. This package
// owns what only the front door knows: the accepted body, the warning
// header and the E2A error bodies of a refused POST.
//
// Files: message.go (the accepted body, the warning header, the error
// body), frontdoor.go (the handler and its routes), turns.go (a request
// naming a task or an ACP session as one of its turns).
package e2a
