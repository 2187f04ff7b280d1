package main

import (
	"testing"

	"github.com/e2a-pipeline/pipeline/agent/tck"
)

// TestDevBuiltinPools: e2a dev serves the default pool (the demo agent, or the
// TCK agent when the default is tck or tck-basic) and the pools tck and
// tck-basic (no streaming, the TCK's extension required), once each.
func TestDevBuiltinPools(t *testing.T) {
	basic := `"tck-basic" (A2A TCK scenarios, no streaming, requires urn:a2a:tck:required-extension`
	for _, tc := range []struct{ def, line string }{
		{"demo", `"demo" (demo, default), "tck" (A2A TCK scenarios), ` + basic + `)`},
		{"mine", `"mine" (demo, default), "tck" (A2A TCK scenarios), ` + basic + `)`},
		{tck.Pool, `"tck" (A2A TCK scenarios, default), ` + basic + `)`},
		{tck.BasicPool, basic + `, default), "tck" (A2A TCK scenarios)`},
	} {
		pools, err := devPools(tc.def)
		if err != nil {
			t.Fatal(err)
		}
		if got := poolsLine(pools); got != tc.line {
			t.Errorf("default %s: %s, want %s", tc.def, got, tc.line)
		}
	}
}
