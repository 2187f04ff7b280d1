package a2a

import "github.com/e2a-pipeline/pipeline/protocols/host"

// TaskEndpoint is the package's JSON-RPC endpoint over a host that keeps
// tasks (a host.TaskRPCServer through host.TaskRPCFunc, the registry's
// A2A entry): [Endpoint], its host known to be a host.TaskHost.
func TaskEndpoint(h host.TaskHost) host.RPCEndpoint { return Endpoint(h) }
