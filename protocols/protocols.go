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
	"github.com/e2a-pipeline/pipeline/workflow"
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
	// transports over egress's event iterator (Bindings). A format
	// belongs to one protocol (New refuses a second one naming it): a
	// protocol that answers with another's renderer, as one answering
	// with egress's E2A NDJSON, lists none.
	Formats []string
	// Errors maps egress's errors (ErrNotFound, ErrNotCancelable…) to
	// its JSON-RPC error; nil when it is not JSON-RPC.
	Errors func(error) *jsonrpc.Error
	// Service is the one value through which its package serves it,
	// implementing one or more of the host's roles: host.RouteServer
	// (HTTP routes, mounted as declared), host.RPCServer or
	// host.TaskRPCServer (a JSON-RPC endpoint, served at each HTTP path of
	// Paths and over lines for "stdio"), host.BindingServer (an SDK's
	// transports: HTTP at the first of Paths, gRPC for "grpc"),
	// host.CardServer (the agent card, at /.well-known/ and beside each
	// HTTP path of Paths; one protocol of a registry at most). New checks
	// the roles against Paths and Methods; ingress mounts every role it
	// finds in one loop. nil: the protocol is mounted by the entry In
	// names.
	// Its renderer conformance cases are its package's, with their golden
	// files under protocols/<Dir>/testdata/<case>/ (but for
	// EgressRenderers); a BindingServer's wire golden files are under
	// protocols/<Dir>/testdata/wire/.
	Service any
	// EgressRenderers: the package's renderers (Formats) are egress's,
	// with their conformance cases and golden files under egress/testdata:
	// E2A's, which are egress's own read API (GET /v1/requests/{id}[/stream]
	// on a worker without ingress). egress's TestConformanceCoversRegistry
	// checks them instead of protocols.TestPackageConformance.
	EgressRenderers bool
	// BodyTypes are the media types of request bodies its doors read
	// besides JSON (application/json, application/*+json, which every door
	// reads): A2E's NDJSON lines. Ingress refuses a body of any other type
	// with HTTP 415 in the door's shape before reading it.
	BodyTypes []string
	// MediaTypeCode is the JSON-RPC code of that refusal; 0: -32600
	// Invalid Request (ACP). A2A's (v0.3, v1.0, and the AgentVault profile
	// on its endpoint) is ContentTypeNotSupportedError, -32005.
	MediaTypeCode int
	// In names the protocol package (protocols/<In>) that owns the
	// protocol when its directory is not the entry's Name: AgentVault is
	// package a2a's (the endpoint is on the A2A entry), with its renderer,
	// conformance case and golden files there; A2A v1.0 is package a2av1
	// (a name with a dot is no package's).
	In string
}

// Package reports whether the protocol is one package (protocols/<Dir>),
// mounted from its Service.
func (p Protocol) Package() bool { return p.Service != nil }

// PackageRenderers reports whether the protocol's renderers are its
// package's, with their conformance cases under protocols/<Dir> (a
// protocol answered through an SDK's Bindings has them only for the
// Formats it renders itself; one with no Formats renders nothing:
// workflows, answered by package workflow's API).
func (p Protocol) PackageRenderers() bool {
	return (p.Package() || p.In != "") && !p.EgressRenderers && len(p.Formats) > 0
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
		Service:         host.RoutesFunc(e2aproto.Routes),
		EgressRenderers: true},
	// A2A v0.3 and the AgentVault profile share one JSON-RPC endpoint,
	// package protocols/a2a's (its RPC, on the A2A entry); tasks/get and
	// tasks/cancel are both theirs, answered in the shape of the protocol
	// that created the task. Both protocols' renderers are the package's
	// (AgentVault's entry names it, In); the frame-to-A2A mapping they
	// share with egress's A2A v1.0 answers is its package a2amap's.
	{Name: A2A, Title: "A2A", Version: "0.3", Adapter: normalizer.ProtocolA2A,
		Paths:         []string{a2a.Path},
		Methods:       a2a.Methods,
		Formats:       []string{a2a.StreamFormat, a2a.SendFormat},
		Errors:        a2a.Error,
		MediaTypeCode: jsonrpc.CodeA2AContentTypeNotSupported,
		Service:       host.TaskRPCFunc(a2a.TaskEndpoint)},
	{Name: AgentVault, Title: "AgentVault A2A profile", Version: "1", Adapter: normalizer.ProtocolAgentVault,
		Paths:         []string{a2a.Path},
		Methods:       a2a.AgentVaultMethods,
		Formats:       []string{a2a.AgentVaultFormat},
		Errors:        a2a.AgentVaultError,
		MediaTypeCode: jsonrpc.CodeA2AContentTypeNotSupported,
		In:            A2A},
	// A2A v1.0 is package protocols/a2av1 (In): its request handler
	// behind the SDK's transports (Bindings) reads requests into the A2A
	// adapter's types and answers with egress's events in v1.0 shapes;
	// the JSON-RPC binding's SendStreamingMessage is rendered by the
	// package (Formats). A single v1.0 call at /a2a is handed to its
	// JSON-RPC binding by protocols/a2a. Its service also writes the
	// agent card of both A2A generations (host.CardServer), served beside
	// /a2a/v1 and /a2a.
	{Name: A2AV1, Title: "A2A", Version: "1.0", Adapter: normalizer.ProtocolA2A,
		Paths:         []string{a2av1.Path, a2a.Path, "grpc"},
		Methods:       a2a.V1Methods,
		Formats:       []string{a2av1.StreamFormat},
		Errors:        a2av1.Error,
		MediaTypeCode: jsonrpc.CodeA2AContentTypeNotSupported,
		Service:       a2av1.Service{},
		In:            "a2av1"},
	{Name: ACP, Title: "ACP", Version: "1", Adapter: normalizer.ProtocolACP,
		Paths:       []string{acp.Path, "stdio"},
		Methods:     acp.Methods,
		OpenMethods: true,
		Formats:     []string{acp.Format},
		Errors:      acp.Error,
		Service:     host.RPCFunc(acp.Endpoint)},
	{Name: A2E, Title: "A2E", Version: a2e.Version, Adapter: normalizer.ProtocolA2E,
		Paths:     []string{a2e.Path},
		Formats:   []string{a2e.Format},
		BodyTypes: []string{"application/x-ndjson", "application/jsonl"},
		Service:   host.RoutesFunc(a2e.Routes)},
	// Workflow executions are answered by package workflow's REST API,
	// its routes served when the host serves workflows (workflow.Host).
	{Name: Workflow, Title: "A2E workflows", Version: "1.0", Adapter: normalizer.ProtocolWorkflow,
		Paths:   workflow.Paths,
		Service: host.RoutesFunc(workflow.Routes)},
}

// Endpoint is the JSON-RPC dispatch table of one path: which protocol a
// method belongs to and whether it streams.
type Endpoint struct {
	path      string
	protocols []Protocol
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
