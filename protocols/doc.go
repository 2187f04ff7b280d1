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
// (egress/conformance_test.go) fails the tests.
//
// Adding a protocol is: its adapter (normalizer), its renderer (egress),
// one entry in [All], its front door if it needs a new endpoint, and the
// golden files (README, "Design": "Adding a protocol").
package protocols
