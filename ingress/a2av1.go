package ingress

import (
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
)

// A2A v1.0 is package protocols/a2av1 (its request handler, its bindings
// over the SDK's transports, its error table); ingress is its host
// (protocolHost: host.BindingHost), mounts its HTTP bindings from the
// registry (mountProtocols: its service is a host.BindingServer) and serves
// its gRPC binding (A2AGRPC).
const (
	// A2AV1Path is the A2A v1.0 JSON-RPC endpoint, with the HTTP+JSON
	// binding under it (A2AV1Path + "/message:send", "/tasks/{id}"…).
	A2AV1Path = a2av1.Path
	// A2AV1ListMax bounds the tasks ListTasks reads per call: the task
	// index is a key-value bucket, listed by scanning the caller's keys.
	A2AV1ListMax = a2av1.ListMax
	// A2AReplayExtension is the URI of the A2A extension (declared in the
	// card) that has SubscribeToTask replay a finished task instead of
	// answering UnsupportedOperationError.
	A2AReplayExtension = a2av1.ReplayExtension
)
