package protocols_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols"
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
