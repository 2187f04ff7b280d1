// Package protocols is the registry of the protocols the pipeline serves:
// for each one, the normalizer adapter that decodes its requests into
// envelopes, where ingress serves it, its JSON-RPC methods (and which of
// them stream), the egress renderers that answer it from a request's
// frames, and how egress's errors read in its error codes.
//
// The front doors dispatch through it (which adapter decodes a call, which
// methods stream and so cannot be batched, the metric label of a method,
// the error mapping of an answer), and the conformance suites check their
// completeness against it: a protocol registered here without its
// normalizer conformance case (normalizer/conformance_test.go) or without
// a conformance renderer case and golden files for each of its formats
// (egress/conformance_test.go, or protocols/<name>/conformance_test.go for
// a protocol that is one package) fails the tests.
//
// A protocol that is one package is mounted by ingress from its entry:
// protocols/e2a (the front door of POST /v1/requests; its answers are
// egress's own read API, [Protocol.EgressRenderers]) and protocols/a2e
// (front door, renderer, error lines) from their Routes, built
// over the pipeline as a host.Host; protocols/acp (JSON-RPC calls,
// renderer, error table) from its RPC endpoint (host.RPCEndpoint), built
// over the pipeline as a host.RPCHost and served by ingress's JSON-RPC
// transports (HTTP with batches and notifications at its paths; lines on
// stdio); protocols/a2a (the JSON-RPC calls of A2A v0.3 and the
// AgentVault profile at /a2a, one endpoint on the A2A entry, the
// AgentVault entry naming its methods, format and error table, and the
// package, [Protocol.In]) the same way over a host.TaskHost, with both
// protocols' renderers, error tables and conformance cases (the
// frame-to-A2A mapping they share with egress's A2A v1.0 answers is its
// leaf package protocols/a2a/a2amap, which egress imports).
// Adding such a protocol is: its adapter (normalizer), its
// package, one entry in [All], and the golden files (README, "Design":
// "Adding a protocol"; docs/design.md, "The protocol seam").
package protocols
