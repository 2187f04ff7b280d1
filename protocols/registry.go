package protocols

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// ErrInvalidProtocol reports a protocol New refuses: a declaration its
// service cannot serve (a path without a role that mounts it, methods
// without an endpoint), a name, path or format taken twice, or an adapter
// the normalizer does not have.
var ErrInvalidProtocol = errors.New("protocols: invalid protocol")

// Adapting is implemented by a service that normalizes its own requests:
// its protocol's Adapter need not be one of normalizer.Protocols (a
// protocol added beside the pipeline's, as protocols/testdata/echo is).
type Adapting interface {
	Normalize(n *normalizer.Normalizer, in normalizer.Input) (*normalizer.Result, error)
}

// Registry is a checked set of protocols: what ingress mounts and the
// conformance suites check. [Default] is the pipeline's.
type Registry struct {
	protocols []Protocol
	card      string // the name of the protocol that serves the card
}

// New returns the registry of ps, in order, each checked against its
// service's roles (see [Protocol.Service]): an error wrapping
// [ErrInvalidProtocol] names the first declaration that cannot be
// served.
func New(ps ...Protocol) (*Registry, error) {
	r := &Registry{}
	names, formats, mounted := map[string]bool{}, map[string]string{}, map[string]string{}
	for _, p := range ps {
		if err := check(p); err != nil {
			return nil, err
		}
		if names[p.Name] {
			return nil, fmt.Errorf("%w: %q registered twice", ErrInvalidProtocol, p.Name)
		}
		names[p.Name] = true
		for _, f := range p.Formats {
			if other, ok := formats[f]; ok {
				return nil, fmt.Errorf("%w: %q: format %q is %q's already", ErrInvalidProtocol, p.Name, f, other)
			}
			formats[f] = p.Name
		}
		if _, ok := p.Service.(host.CardServer); ok {
			if r.card != "" {
				return nil, fmt.Errorf("%w: %q: the agent card is served by %q already", ErrInvalidProtocol, p.Name, r.card)
			}
			r.card = p.Name
		}
		for _, path := range mountedPaths(p) {
			if other, ok := mounted[path]; ok {
				return nil, fmt.Errorf("%w: %q: path %s is served by %q already", ErrInvalidProtocol, p.Name, path, other)
			}
			mounted[path] = p.Name
		}
		r.protocols = append(r.protocols, p)
	}
	return r, nil
}

// check refuses a declaration p's service cannot serve.
func check(p Protocol) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %q: %s", ErrInvalidProtocol, p.Name, fmt.Sprintf(format, a...))
	}
	if p.Name == "" {
		return fmt.Errorf("%w: a protocol without a name", ErrInvalidProtocol)
	}
	_, adapts := p.Service.(Adapting)
	if !adapts && !slices.Contains(normalizer.Protocols, p.Adapter) {
		return bad("adapter %q is no normalizer adapter, and its service does not normalize (Adapting)", p.Adapter)
	}
	_, routes := p.Service.(host.RouteServer)
	rpc := rpcServer(p.Service)
	_, bindings := p.Service.(host.BindingServer)
	_, card := p.Service.(host.CardServer)
	if p.Service != nil && !routes && !rpc && !bindings && !card {
		return bad("its service (%T) has no role (host.RouteServer, RPCServer, TaskRPCServer, BindingServer or CardServer)", p.Service)
	}
	for _, path := range p.Paths {
		switch {
		case p.Service == nil:
			// Mounted outside the registry, or by the entry In names.
		case path == "stdio" && !rpc:
			return bad("served over stdio without a JSON-RPC endpoint (host.RPCServer)")
		case path == "grpc" && !bindings:
			return bad("served over gRPC without bindings (host.BindingServer)")
		case path != "stdio" && path != "grpc" && !strings.HasPrefix(path, "/"):
			return bad("path %q is neither an HTTP path, stdio nor grpc", path)
		}
	}
	if p.Methods != nil && !rpc && !bindings && p.In == "" {
		return bad("JSON-RPC methods without an endpoint to serve them (host.RPCServer, TaskRPCServer or BindingServer, or In)")
	}
	if p.Errors != nil && p.Methods == nil {
		return bad("a JSON-RPC error table without JSON-RPC methods")
	}
	return nil
}

// rpcServer reports whether s serves a JSON-RPC endpoint.
func rpcServer(s any) bool {
	_, rpc := s.(host.RPCServer)
	_, task := s.(host.TaskRPCServer)
	return rpc || task
}

// mountedPaths are the HTTP paths the host mounts p's service at: a
// BindingServer's first path, every HTTP path of a JSON-RPC endpoint
// (route servers declare their routes' paths themselves).
func mountedPaths(p Protocol) []string {
	if _, ok := p.Service.(host.BindingServer); ok && len(p.Paths) > 0 {
		return p.Paths[:1]
	}
	if !rpcServer(p.Service) {
		return nil
	}
	var out []string
	for _, path := range p.Paths {
		if strings.HasPrefix(path, "/") {
			out = append(out, path)
		}
	}
	return out
}

// defaultRegistry is the pipeline's protocols, checked at start: a
// declaration its service cannot serve stops the program here.
var defaultRegistry = func() *Registry {
	r, err := New(all...)
	if err != nil {
		panic(err)
	}
	return r
}()

// Default returns the pipeline's registry: every protocol it serves.
func Default() *Registry { return defaultRegistry }

// All returns the registry's protocols, in a stable order.
func (r *Registry) All() []Protocol { return slices.Clone(r.protocols) }

// Lookup returns the protocol named name.
func (r *Registry) Lookup(name string) (Protocol, bool) {
	i := slices.IndexFunc(r.protocols, func(p Protocol) bool { return p.Name == name })
	if i < 0 {
		return Protocol{}, false
	}
	return r.protocols[i], true
}

// Card returns the protocol whose service writes the agent card
// (host.CardServer) and that service; ok false when none does.
func (r *Registry) Card() (p Protocol, cs host.CardServer, ok bool) {
	if p, ok = r.Lookup(r.card); !ok {
		return Protocol{}, nil, false
	}
	cs, ok = p.Service.(host.CardServer)
	return p, cs, ok
}

// At returns the JSON-RPC endpoint of path: the registry's protocols
// with methods served there.
func (r *Registry) At(path string) Endpoint {
	e := Endpoint{path: path}
	for _, p := range r.protocols {
		if p.Methods != nil && slices.Contains(p.Paths, path) {
			e.protocols = append(e.protocols, p)
		}
	}
	return e
}

// All returns every protocol of the [Default] registry, in a stable order.
func All() []Protocol { return defaultRegistry.All() }

// Lookup returns the protocol of the [Default] registry named name.
func Lookup(name string) (Protocol, bool) { return defaultRegistry.Lookup(name) }

// At returns the endpoint of path in the [Default] registry.
func At(path string) Endpoint { return defaultRegistry.At(path) }
