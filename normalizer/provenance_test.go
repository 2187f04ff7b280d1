package normalizer_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestSourceProtocolSpecSet: every envelope the adapters write (all golden
// outputs) has a source_protocol of the specification's set (e2a, acp,
// a2a; E2A spec §4.2); AgentVault, A2E and legacy AgentRequest envelopes
// carry their origin in details.ingress_protocol (issue 16: source_protocol
// was agentvault, a2e or agent_request).
func TestSourceProtocolSpecSet(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*", "*.out.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no goldens: %v", err)
	}
	origins := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Envelope *e2a.Envelope `json:"envelope"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if out.Envelope == nil || out.Envelope.Provenance == nil {
			continue
		}
		p := out.Envelope.Provenance
		switch p.SourceProtocol {
		case e2a.SourceE2A, e2a.SourceACP, e2a.SourceA2A:
		default:
			t.Errorf("%s: source_protocol %q", f, p.SourceProtocol)
		}
		if o, ok := p.Details[e2a.DetailIngressProtocol].(string); ok {
			origins[o] = true
			if e2a.SourceProtocolOf(o) != p.SourceProtocol {
				t.Errorf("%s: origin %q under source_protocol %q", f, o, p.SourceProtocol)
			}
		}
	}
	for _, o := range []string{e2a.SourceAgentVault, e2a.SourceA2E, e2a.SourceLegacy} {
		if !origins[o] {
			t.Errorf("no golden carries ingress_protocol %q", o)
		}
	}
}
