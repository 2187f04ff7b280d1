package host

// The roles of a protocol's service: the one value through which the host
// serves a protocol (package protocols' Protocol.Service). A service
// implements one or more of them; the registry checks them against what
// the protocol declares (its paths, methods and formats) when it is built,
// and the host mounts every role it finds, in one loop over the registry.
// The Func types make a role of a plain function.

// RouteServer serves HTTP routes (a front door) over the host, mounted at
// "Method Path"; other methods on a path are answered 405.
type RouteServer interface {
	Routes(h Host) []Route
}

// RPCServer serves one JSON-RPC endpoint over the host: over HTTP at each
// of the protocol's paths, and over lines ("stdio" among its paths) when
// the endpoint has [Lines].
type RPCServer interface {
	RPCEndpoint(h RPCHost) RPCEndpoint
}

// TaskRPCServer is an [RPCServer] whose calls keep tasks: it needs the
// frames of its tasks' requests and the A2A v1.0 handler ([TaskHost]).
type TaskRPCServer interface {
	TaskEndpoint(h TaskHost) RPCEndpoint
}

// BindingServer serves transports an SDK implements over the protocol's
// request handler ([Bindings]): JSONRPC (POST) and REST (every path
// under it) at the protocol's first path, GRPC's service on the host's
// gRPC server ("grpc" among its paths).
type BindingServer interface {
	Bindings(h BindingHost) Bindings
}

// BindingHost is the pipeline as a [BindingServer] sees it: the [Host]
// (whose Gate admits HTTP calls: the Caller it returns is a [BindingCaller]),
// the gate of calls with headers and no HTTP request ([HeaderGate]), the
// cancel of a request ([Canceler]) and the frames of tasks' requests.
type BindingHost interface {
	Host
	HeaderGate
	Canceler
	// TaskFrames reads the frames of tasks' requests.
	TaskFrames() TaskFrames
}

// RoutesFunc is a [RouteServer] of a function.
type RoutesFunc func(h Host) []Route

// Routes returns f(h).
func (f RoutesFunc) Routes(h Host) []Route { return f(h) }

// RPCFunc is an [RPCServer] of a function.
type RPCFunc func(h RPCHost) RPCEndpoint

// RPCEndpoint returns f(h).
func (f RPCFunc) RPCEndpoint(h RPCHost) RPCEndpoint { return f(h) }

// TaskRPCFunc is a [TaskRPCServer] of a function.
type TaskRPCFunc func(h TaskHost) RPCEndpoint

// TaskEndpoint returns f(h).
func (f TaskRPCFunc) TaskEndpoint(h TaskHost) RPCEndpoint { return f(h) }

// BindingsFunc is a [BindingServer] of a function.
type BindingsFunc func(h BindingHost) Bindings

// Bindings returns f(h).
func (f BindingsFunc) Bindings(h BindingHost) Bindings { return f(h) }

// Compile-time checks: the Func types are their roles.
var (
	_ RouteServer   = RoutesFunc(nil)
	_ RPCServer     = RPCFunc(nil)
	_ TaskRPCServer = TaskRPCFunc(nil)
	_ BindingServer = BindingsFunc(nil)
)
