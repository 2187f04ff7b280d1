package conformance

import (
	"path/filepath"
	"testing"

	"github.com/e2a-pipeline/pipeline/render"
)

// Case is one renderer of a package under the conformance suite
// ([TestRenderers]).
type Case struct {
	// Name is the case's name (<format> or <format>_<variant>): the
	// subtests' prefix and the directory of its golden files.
	Name string
	// Dir is the directory the case's golden files are under; "" is the
	// package's testdata (GoldenPath).
	Dir string
	// New builds the renderer for a scenario.
	New func(o *render.Output, sc Scenario) render.Renderer
	// SSE: the renderer writes Server-Sent Events. An answer it started
	// carries the event-stream headers (Content-Type text/event-stream,
	// Cache-Control no-cache, X-Accel-Buffering no), and its body is well
	// formed ([SSEData]).
	SSE bool
	// AlwaysSSE: every answer of the SSE renderer is an event stream, one
	// the driver never started too (not found, an error before the first
	// frame).
	AlwaysSSE bool
	// Check, when set, checks what the renderer wrote for sc beyond the
	// suite's invariants.
	Check func(t *testing.T, sc Scenario, run *Result)
}

// sseHeaders are the headers of every event stream the pipeline writes.
var sseHeaders = map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

// TestRenderers runs each case through every scenario of [Scenarios] as
// the subtest "<Name>/<scenario>", rendered step by step ([Run]), and
// checks what every renderer must do whatever its format: the output
// matches the golden file, step by step (update rewrites it: go test
// -update), something was written, and an SSE case's stream is one; then
// the case's Check. It is the one suite of every renderer: egress's and
// each protocol package's conformance_test.go call it.
func TestRenderers(t *testing.T, update bool, cases ...Case) {
	t.Helper()
	if len(cases) == 0 {
		t.Fatal("conformance: no renderer case")
	}
	for _, c := range cases {
		for _, sc := range Scenarios() {
			t.Run(c.Name+"/"+sc.Name, func(t *testing.T) {
				run, err := Run(sc, func(o *render.Output) render.Renderer { return c.New(o, sc) })
				if err != nil {
					t.Fatal(err)
				}
				path := GoldenPath(c.Name, sc.Name)
				if c.Dir != "" {
					path = filepath.Join(c.Dir, c.Name, sc.Name+".golden")
				}
				if err := MatchGolden(path, run.Golden, update); err != nil {
					t.Error(err)
				}
				if len(run.Body) == 0 {
					t.Error("nothing written")
				}
				if c.SSE && (run.Started || c.AlwaysSSE) {
					for h, v := range sseHeaders {
						if got := run.Header.Get(h); got != v {
							t.Errorf("%s = %q, want %q", h, got, v)
						}
					}
					if _, err := SSEData(run.Body); err != nil {
						t.Error(err)
					}
				}
				if c.Check != nil {
					c.Check(t, sc, run)
				}
			})
		}
	}
}
