package protocols

import (
	"slices"
	"strings"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
	"github.com/e2a-pipeline/pipeline/protocols/a2e"
	"github.com/e2a-pipeline/pipeline/protocols/acp"
	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// Method is one JSON-RPC method of a protocol.
type Method = host.Method

// Protocol is one protocol the pipeline serves.
type Protocol struct {
	// Name is unique in the registry.
	Name string
	// Title and Version are for people (metrics, docs, errors).
	Title, Version string
	// Adapter is the normalizer adapter that decodes its requests
	// (one of normalizer.Protocols).
	Adapter string
	// Paths are the HTTP endpoints ingress serves it at ("stdio": ACP
	// over standard input and output too; "grpc": A2A v1.0's gRPC binding
	// on its own listener).
	Paths []string
	// Methods are its JSON-RPC methods; nil when it is not JSON-RPC.
	Methods []Method
	// OpenMethods: methods beyond Methods are passed to the agent pool
	// (ACP's extension and agent methods).
	OpenMethods bool
	// Formats are the egress renderers (egress.Formats) that answer it
	// from a request's frames. A2A v1.0 has one, its JSON-RPC binding's
	// SendStreamingMessage SSE; its other answers are the SDK's
	// transports over egress's event iterator (Bindings).
	Formats []string
	// Errors maps egress's errors (ErrNotFound, ErrNotCancelable…) to
	// its JSON-RPC error; nil when it is not JSON-RPC.
	Errors func(error) *jsonrpc.Error
	// Routes, set for a protocol that is one package (protocols/<Name>:
	// front door, renderer, error table), are the HTTP routes of its
	// front door over the pipeline host; ingress mounts them at Paths.
	// Its renderer conformance cases are that package's, with their
	// golden files under protocols/<Name>/testdata/<case>/.
	Routes func(h host.Host) []host.Route
	// RPC, set for a JSON-RPC protocol that is one package
	// (protocols/<Name>: its calls, renderer, error table), is its
	// endpoint over the pipeline host; ingress serves it at Paths over its
	// transports (HTTP with batches and notifications; "stdio": lines).
	// Its renderer conformance cases are that package's, as for Routes.
	RPC func(h host.RPCHost) host.RPCEndpoint
	// Bindings, set for a protocol that is one package answered through
	// an SDK's transports (A2A v1.0, protocols/a2av1: a2a-go's JSON-RPC,
	// HTTP+JSON and gRPC bindings over the package's request handler), are
	// its bindings over the pipeline host; ingress serves the HTTP ones at
	// the first of Paths and registers the gRPC service on its gRPC server
	// ("grpc"). Its answers are egress's A2A events converted by the SDK,
	// but for the streams the package renders itself (Formats, with their
	// conformance cases as for Routes); its wire's golden files are under
	// protocols/<Dir>/testdata/wire/.
	Bindings func(h a2av1.Host) host.V1Bindings
	// EgressRenderers: the package's renderers (Formats) are egress's,
	// with their conformance cases and golden files under egress/testdata:
	// E2A's, which are egress's own read API (GET /v1/requests/{id}[/stream]
	// on a worker without ingress). egress's TestConformanceCoversRegistry
	// checks them instead of protocols.TestPackageConformance.
	EgressRenderers bool
	// In names the protocol package (protocols/<In>) that owns the
	// protocol when its directory is not the entry's Name: AgentVault is
	// package a2a's (the endpoint is on the A2A entry), with its renderer,
	// conformance case and golden files there; A2A v1.0 is package a2av1
	// (a name with a dot is no package's).
	In string
}

// Package reports whether the protocol is one package (protocols/<Dir>),
// mounted from its Routes, its RPC endpoint or its Bindings.
func (p Protocol) Package() bool { return p.Routes != nil || p.RPC != nil || p.Bindings != nil }

// PackageRenderers reports whether the protocol's renderers are its
// package's, with their conformance cases under protocols/<Dir> (a
// protocol answered through an SDK's Bindings has them only for the
// Formats it renders itself).
func (p Protocol) PackageRenderers() bool {
	return (p.Package() || p.In != "") && !p.EgressRenderers && (p.Bindings == nil || len(p.Formats) > 0)
}

// Dir is the directory of the protocol's package under protocols/: In
// when set, else Name.
func (p Protocol) Dir() string {
	if p.In != "" {
		return p.In
	}
	return p.Name
}

// Registered protocol names.
const (
	E2A        = e2aproto.Name
	A2A        = "a2a"
	A2AV1      = "a2a.v1"
	AgentVault = "agentvault"
	ACP        = acp.Name
	A2E        = a2e.Name
	Workflow   = "a2e.workflow"
)

var all = []Protocol{
	// E2A's front door is package protocols/e2a's; its answers are
	// egress's own read API (the format frames are stored in, served by
	// egress workers without ingress), so its renderers stay egress's.
	{Name: E2A, Title: "E2A", Version: e2a.ProtocolVersion, Adapter: normalizer.ProtocolE2A,
		Paths:           []string{e2aproto.Path},
		Formats:         []string{egress.FormatE2ASSE, egress.FormatE2ANDJSON, egress.FormatE2AJSON},
		Routes:          e2aproto.Routes,
		EgressRenderers: true},
	// A2A v0.3 and the AgentVault profile share one JSON-RPC endpoint,
	// package protocols/a2a's (its RPC, on the A2A entry); tasks/get and
	// tasks/cancel are both theirs, answered in the shape of the protocol
	// that created the task. Both protocols' renderers are the package's
	// (AgentVault's entry names it, In); the frame-to-A2A mapping they
	// share with egress's A2A v1.0 answers is its package a2amap's.
	{Name: A2A, Title: "A2A", Version: "0.3", Adapter: normalizer.ProtocolA2A,
		Paths:   []string{a2a.Path},
		Methods: a2a.Methods,
		Formats: []string{a2a.StreamFormat, a2a.SendFormat},
		Errors:  a2a.Error,
		RPC:     a2a.Endpoint},
	{Name: AgentVault, Title: "AgentVault A2A profile", Version: "1", Adapter: normalizer.ProtocolAgentVault,
		Paths:   []string{a2a.Path},
		Methods: a2a.AgentVaultMethods,
		Formats: []string{a2a.AgentVaultFormat},
		Errors:  a2a.AgentVaultError,
		In:      A2A},
	// A2A v1.0 is package protocols/a2av1 (In): its request handler
	// behind the SDK's transports (Bindings) reads requests into the A2A
	// adapter's types and answers with egress's events in v1.0 shapes;
	// the JSON-RPC binding's SendStreamingMessage is rendered by the
	// package (Formats). A single v1.0 call at /a2a is handed to its
	// JSON-RPC binding by protocols/a2a.
	{Name: A2AV1, Title: "A2A", Version: "1.0", Adapter: normalizer.ProtocolA2A,
		Paths:    []string{a2av1.Path, a2a.Path, "grpc"},
		Methods:  a2a.V1Methods,
		Formats:  []string{a2av1.StreamFormat},
		Errors:   a2av1.Error,
		Bindings: a2av1.Bindings,
		In:       "a2av1"},
	{Name: ACP, Title: "ACP", Version: "1", Adapter: normalizer.ProtocolACP,
		Paths:       []string{acp.Path, "stdio"},
		Methods:     acp.Methods,
		OpenMethods: true,
		Formats:     []string{acp.Format},
		Errors:      acp.Error,
		RPC:         acp.Endpoint},
	{Name: A2E, Title: "A2E", Version: a2e.Version, Adapter: normalizer.ProtocolA2E,
		Paths:   []string{a2e.Path},
		Formats: []string{a2e.Format},
		Routes:  a2e.Routes},
	// Workflow executions are answered by package workflow's REST API.
	{Name: Workflow, Title: "A2E workflows", Version: "1.0", Adapter: normalizer.ProtocolWorkflow,
		Paths: []string{"/api/v1/workflows/execute"}},
}

// All returns every registered protocol, in a stable order.
func All() []Protocol { return slices.Clone(all) }

// Lookup returns the protocol named name.
func Lookup(name string) (Protocol, bool) {
	i := slices.IndexFunc(all, func(p Protocol) bool { return p.Name == name })
	if i < 0 {
		return Protocol{}, false
	}
	return all[i], true
}

// Endpoint is the JSON-RPC dispatch table of one path: which protocol a
// method belongs to and whether it streams.
type Endpoint struct {
	path      string
	protocols []Protocol
}

// At returns the endpoint of path.
func At(path string) Endpoint {
	var e Endpoint
	e.path = path
	for _, p := range all {
		if p.Methods != nil && slices.Contains(p.Paths, path) {
			e.protocols = append(e.protocols, p)
		}
	}
	return e
}

// Method returns the protocol that defines method at this endpoint (the
// first registered when several do) and the method.
func (e Endpoint) Method(name string) (Protocol, Method, bool) {
	for _, p := range e.protocols {
		if i := slices.IndexFunc(p.Methods, func(m Method) bool { return m.Name == name }); i >= 0 {
			return p, p.Methods[i], true
		}
	}
	return Protocol{}, Method{}, false
}

// Streaming reports whether method is answered as a stream here (and so
// cannot be batched).
func (e Endpoint) Streaming(method string) bool {
	_, m, ok := e.Method(method)
	return ok && m.Streaming
}

// Label bounds a method name for a metric label: a method of this
// endpoint's protocols, "_ext" for an extension method of a protocol with
// open methods, "other" for anything else.
func (e Endpoint) Label(method string) string {
	if _, _, ok := e.Method(method); ok {
		return method
	}
	for _, p := range e.protocols {
		if p.OpenMethods {
			if strings.HasPrefix(method, "_") {
				return "_ext"
			}
			if p.Adapter == normalizer.ProtocolACP && normalizer.IsACPMethod(method) {
				return method
			}
		}
	}
	return "other"
}
