package main

import (
	"testing"

	"github.com/e2a-pipeline/pipeline/agent/tck"
)

// TestDevBuiltinPools: e2a dev serves the default pool (the demo agent, or the
// TCK agent when the default is tck) and the pool tck, once each.
func TestDevBuiltinPools(t *testing.T) {
	for _, tc := range []struct{ def, line string }{
		{"demo", `"demo" (demo, default), "tck" (A2A TCK scenarios)`},
		{"mine", `"mine" (demo, default), "tck" (A2A TCK scenarios)`},
		{tck.Pool, `"tck" (A2A TCK scenarios, default)`},
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
