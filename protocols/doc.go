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
// A protocol declares what it serves in one value, its [Protocol]: name,
// adapter, paths, JSON-RPC methods, formats, error table, and its
// Service, which implements the host's roles (package protocols/host):
// host.RouteServer (HTTP routes: protocols/e2a, protocols/a2e),
// host.RPCServer or host.TaskRPCServer (a JSON-RPC endpoint served over
// HTTP at its paths with batches and notifications, and over lines for
// "stdio": protocols/acp; protocols/a2a, A2A v0.3 and the AgentVault
// profile, whose AgentVault entry names its methods, format and error
// table, and the package, [Protocol.In]), host.BindingServer (an SDK's
// transports over the package's handler: protocols/a2av1's JSON-RPC,
// HTTP+JSON and gRPC), host.CardServer (the agent card: protocols/a2av1's,
// of both A2A generations; one protocol at most); workflows are the
// routes of package workflow's API. [New] checks each declaration against its
// service's roles and refuses ([ErrInvalidProtocol]) what cannot be
// served (a path "stdio" without a JSON-RPC endpoint, "grpc" without
// bindings, methods without an endpoint, an adapter the normalizer lacks
// unless the service normalizes itself, [Adapting]) and a name, format or
// mounted path taken twice, or a second card server; [Default], the pipeline's registry, is checked
// at start. Ingress mounts every role of every protocol of its registry in
// one loop (ingress.WithProtocols). Adding a protocol is its package, one
// entry in a registry and its golden files: TestAddedProtocol registers
// protocols/testdata/echo beside the pipeline's protocols and has it
// served, normalized and conformance-checked with no other file touched
// (docs/protocols.md, "Adding a protocol").
package protocols
