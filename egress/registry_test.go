package egress_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/e2a-pipeline/pipeline/protocols"
)

// TestConformanceCoversRegistry: every output format a registered protocol
// is answered in has a renderer case in the conformance suite, with its
// golden files; a protocol registered without them fails here. A protocol
// that is one package (Routes set) has its cases in its package:
// protocols.TestPackageConformance checks those.
func TestConformanceCoversRegistry(t *testing.T) {
	cases := conformanceFormats()
	for _, p := range protocols.All() {
		if p.PackageRenderers() {
			continue // protocols.TestPackageConformance
		}
		for _, f := range p.Formats {
			names := cases[f]
			if len(names) == 0 {
				t.Errorf("protocol %s: format %s has no renderer conformance case", p.Name, f)
			}
			for _, n := range names {
				golden, _ := filepath.Glob(filepath.Join("testdata", n, "*.golden"))
				if len(golden) == 0 {
					t.Errorf("protocol %s: renderer case %s has no golden files under testdata/%s", p.Name, n, n)
				}
			}
		}
	}
	if _, err := os.Stat("testdata"); err != nil {
		t.Fatal(err)
	}
}
