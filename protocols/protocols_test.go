package protocols_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// TestRegistryComplete: every protocol names an adapter the normalizer
// has, and every adapter is some protocol's; every output format of egress
// answers some protocol and every format named is egress's; JSON-RPC
// protocols map errors; names are unique.
func TestRegistryComplete(t *testing.T) {
	n := normalizer.New(normalizer.Config{})
	adapters := map[string]bool{}
	formats := map[string]bool{}
	names := map[string]bool{}
	for _, p := range protocols.All() {
		if names[p.Name] {
			t.Errorf("%s registered twice", p.Name)
		}
		names[p.Name] = true
		if _, ok := n.Adapter(p.Adapter); !ok {
			t.Errorf("%s: no normalizer adapter %q", p.Name, p.Adapter)
		}
		adapters[p.Adapter] = true
		for _, f := range p.Formats {
			if !slices.Contains(egress.Formats, f) {
				t.Errorf("%s: egress has no format %q", p.Name, f)
			}
			formats[f] = true
		}
		if p.Methods != nil && p.Errors == nil && p.Formats != nil {
			t.Errorf("%s: JSON-RPC answered by egress but no error mapping", p.Name)
		}
		if len(p.Paths) == 0 || p.Version == "" {
			t.Errorf("%s: no path or version", p.Name)
		}
	}
	for _, a := range normalizer.Protocols {
		if !adapters[a] {
			t.Errorf("normalizer adapter %q is no registered protocol's", a)
		}
	}
	for _, f := range egress.Formats {
		if !formats[f] {
			t.Errorf("egress format %q answers no registered protocol", f)
		}
	}
}

// TestPackageConformance: a protocol that is one package (Routes or RPC
// set, or In naming the package that owns it) runs its renderer for each
// of its formats through the kit's suite (conformance.TestRenderers) in
// protocols/<dir>/conformance_test.go (Protocol.Dir), its cases named
// after the format (<format>, or <format>_<variant> for several:
// acp_ndjson, acp_sse), with a golden file for every scenario under
// protocols/<dir>/testdata/<case>/; a protocol package registered without
// them fails here (egress's TestConformanceCoversRegistry checks the
// others: E2A's formats, egress's own).
func TestPackageConformance(t *testing.T) {
	for _, p := range protocols.All() {
		if !p.PackageRenderers() {
			continue
		}
		src, err := os.ReadFile(filepath.Join(p.Dir(), "conformance_test.go"))
		if err != nil || !strings.Contains(string(src), "conformance.TestRenderers(") {
			t.Errorf("protocol %s: no renderer conformance suite in %s/conformance_test.go (conformance.TestRenderers)", p.Name, p.Dir())
		}
		if len(p.Formats) == 0 {
			t.Errorf("protocol %s: a package with no output format", p.Name)
		}
		for _, f := range p.Formats {
			cases, _ := filepath.Glob(filepath.Join(p.Dir(), "testdata", f+"_*"))
			if dir := filepath.Join(p.Dir(), "testdata", f); isDir(dir) {
				cases = append(cases, dir)
			}
			if len(cases) == 0 {
				t.Errorf("protocol %s: format %s: no conformance case under %s/testdata/%s[_*]/", p.Name, f, p.Dir(), f)
			}
			for _, c := range cases {
				for _, sc := range conformance.Scenarios() {
					path := filepath.Join(p.Dir(), conformance.GoldenPath(filepath.Base(c), sc.Name))
					if _, err := os.Stat(path); err != nil {
						t.Errorf("protocol %s: format %s: no golden file for scenario %s: %v", p.Name, f, sc.Name, err)
					}
				}
			}
		}
	}
}

// TestBindingsWire: a protocol package answered through an SDK's
// Bindings (A2A v1.0) has its wire pinned by golden files under
// protocols/<dir>/testdata/wire/ (written by a test over the whole
// pipeline, ingress's TestA2AV1WireGolden), whatever its package renders
// itself (TestPackageConformance covers those).
func TestBindingsWire(t *testing.T) {
	for _, p := range protocols.All() {
		if _, ok := p.Service.(host.BindingServer); !ok {
			continue
		}
		if len(p.Formats) > 0 && !p.PackageRenderers() {
			t.Errorf("protocol %s: renders %v but they are not its package's", p.Name, p.Formats)
		}
		golden, _ := filepath.Glob(filepath.Join(p.Dir(), "testdata", "wire", "*.json"))
		if len(golden) == 0 {
			t.Errorf("protocol %s: no wire golden files under %s/testdata/wire/", p.Name, p.Dir())
		}
	}
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// TestRoutesAtPaths: the routes of a protocol package are at its
// registered paths; a JSON-RPC package's endpoint is named after it and
// answers calls.
func TestRoutesAtPaths(t *testing.T) {
	for _, p := range protocols.All() {
		rs, ok := p.Service.(host.RouteServer)
		if !ok {
			continue
		}
		for _, rt := range rs.Routes(nil) {
			if !slices.Contains(p.Paths, rt.Path) || rt.Method == "" || rt.Handler == nil {
				t.Errorf("protocol %s: route %s %s (paths %v)", p.Name, rt.Method, rt.Path, p.Paths)
			}
		}
	}
	for _, p := range protocols.All() {
		e, ok := endpointOf(p.Service)
		if !ok {
			continue
		}
		if e.Protocol != p.Name || e.Serve == nil || e.Refuse == nil || e.Streaming == nil || e.Metric == nil || p.Methods == nil {
			t.Errorf("protocol %s: endpoint %+v", p.Name, e)
		}
		for _, m := range p.Methods {
			if e.Streaming(m.Name) != m.Streaming || e.Metric(m.Name) != m.Name {
				t.Errorf("protocol %s: method %s: streaming %v, label %q", p.Name, m.Name, e.Streaming(m.Name), e.Metric(m.Name))
			}
		}
	}
}

// endpointOf is the JSON-RPC endpoint of a service, over no host.
func endpointOf(s any) (host.RPCEndpoint, bool) {
	switch s := s.(type) {
	case host.RPCServer:
		return s.RPCEndpoint(nil), true
	case host.TaskRPCServer:
		return s.TaskEndpoint(nil), true
	}
	return host.RPCEndpoint{}, false
}

// TestRegistryRefuses: New refuses, with ErrInvalidProtocol, every
// declaration its service cannot serve, and a name, format or mounted
// path taken twice; the pipeline's own registry passes.
func TestRegistryRefuses(t *testing.T) {
	routes := host.RoutesFunc(func(host.Host) []host.Route { return nil })
	rpc := host.RPCFunc(func(host.RPCHost) host.RPCEndpoint { return host.RPCEndpoint{} })
	ok := protocols.Protocol{Name: "x", Adapter: normalizer.ProtocolE2A, Paths: []string{"/x"}, Service: routes}
	for name, ps := range map[string][]protocols.Protocol{
		"no name":            {{Adapter: normalizer.ProtocolE2A}},
		"unknown adapter":    {{Name: "x", Adapter: "nope", Service: routes}},
		"service, no role":   {{Name: "x", Adapter: normalizer.ProtocolE2A, Service: 42}},
		"stdio without rpc":  {{Name: "x", Adapter: normalizer.ProtocolE2A, Paths: []string{"stdio"}, Service: routes}},
		"grpc without bind":  {{Name: "x", Adapter: normalizer.ProtocolE2A, Paths: []string{"grpc"}, Service: rpc}},
		"bad path":           {{Name: "x", Adapter: normalizer.ProtocolE2A, Paths: []string{"x"}, Service: routes}},
		"methods, no server": {{Name: "x", Adapter: normalizer.ProtocolE2A, Methods: []protocols.Method{{Name: "m"}}, Service: routes}},
		"errors, no methods": {{Name: "x", Adapter: normalizer.ProtocolE2A, Service: routes, Errors: func(error) *jsonrpc.Error { return nil }}},
		"name twice":         {ok, ok},
		"format twice": {{Name: "x", Adapter: normalizer.ProtocolE2A, Formats: []string{"f"}, Service: routes},
			{Name: "y", Adapter: normalizer.ProtocolE2A, Formats: []string{"f"}, Service: routes}},
		"path twice": {{Name: "x", Adapter: normalizer.ProtocolE2A, Paths: []string{"/p"}, Methods: []protocols.Method{}, Service: rpc},
			{Name: "y", Adapter: normalizer.ProtocolE2A, Paths: []string{"/p"}, Methods: []protocols.Method{}, Service: rpc}},
	} {
		if _, err := protocols.New(ps...); !errors.Is(err, protocols.ErrInvalidProtocol) {
			t.Errorf("%s: %v, want ErrInvalidProtocol", name, err)
		}
	}
	if _, err := protocols.New(ok); err != nil {
		t.Errorf("a route protocol: %v", err)
	}
	if _, err := protocols.New(protocols.All()...); err != nil {
		t.Errorf("the pipeline's registry: %v", err)
	}
}

func TestEndpoint(t *testing.T) {
	a2a := protocols.At("/a2a")
	for m, want := range map[string]string{"message/send": protocols.A2A, "tasks/get": protocols.A2A,
		"tasks/sendSubscribe": protocols.AgentVault, "SendMessage": protocols.A2AV1} {
		if p, _, ok := a2a.Method(m); !ok || p.Name != want {
			t.Errorf("/a2a %s: %s %v, want %s", m, p.Name, ok, want)
		}
	}
	for m, want := range map[string]bool{"message/stream": true, "tasks/resubscribe": true, "tasks/sendSubscribe": true,
		"message/send": false, "tasks/get": false, "no/such": false} {
		if got := a2a.Streaming(m); got != want {
			t.Errorf("/a2a streaming %s = %v", m, got)
		}
	}
	if a2a.Label("no/such") != "other" || a2a.Label("tasks/send") != "tasks/send" {
		t.Error("/a2a labels")
	}
	acp := protocols.At("/acp")
	if !acp.Streaming("session/prompt") || acp.Streaming("session/new") || acp.Label("_vendor/x") != "_ext" || acp.Label("x/y") != "other" {
		t.Error("/acp table")
	}
}

// Which protocol a JSON-RPC call at /a2a names, and how it is answered.
func ExampleEndpoint_Method() {
	p, m, _ := protocols.At("/a2a").Method("tasks/sendSubscribe")
	fmt.Println(p.Title, p.Version, m.Streaming, p.Formats)
	// Output: AgentVault A2A profile 1 true [agentvault_sse]
}
