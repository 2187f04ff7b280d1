package a2e

import (
	"encoding/json"
	"flag"
	"testing"

	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// rendererCase is the renderer conformance case of the A2E format (the
// registry's completeness check looks for its golden files under
// testdata/<Format>/).
const rendererCase = Format

// TestRendererConformance runs the renderer through the conformance (package protocols/conformance)
// scenarios and compares its output step by step with
// testdata/a2e_ndjson/<scenario>.golden (go test -run Conformance -update
// rewrites them).
func TestRendererConformance(t *testing.T) {
	old := now
	now = conformance.Time
	defer func() { now = old }()
	for _, sc := range conformance.Scenarios() {
		t.Run(rendererCase+"/"+sc.Name, func(t *testing.T) {
			run, err := conformance.Run(sc, func(o *render.Output) render.Renderer {
				return NewRenderer(o, Params{ReqID: "a1b2c3", ReqType: "tool/call/req"})
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := conformance.MatchGolden(conformance.GoldenPath(rendererCase, sc.Name), run.Golden, *update); err != nil {
				t.Error(err)
			}
			if len(run.Body) == 0 {
				t.Errorf("nothing written")
			}
			checkLines(t, run.Body)
		})
	}
}

// checkLines: every line is an A2E message answering a1b2c3; events in
// increasing seq, the response last, errors with retryable, a code and
// the capability.
func checkLines(t *testing.T, body []byte) {
	lines, err := conformance.NDJSONLines(body)
	if err != nil {
		t.Fatal(err)
	}
	var seq int64 = -1
	for i, l := range lines {
		var m Message
		if err := json.Unmarshal(l, &m); err != nil || m.A2E != "1.0" || m.ReqID != "a1b2c3" {
			t.Fatalf("line %d: %s", i, l)
		}
		switch m.Type {
		case EventType:
			if m.Seq == nil || *m.Seq <= seq {
				t.Errorf("seq not increasing: %s", l)
			} else {
				seq = *m.Seq
			}
		case "tool/call/resp":
			if i != len(lines)-1 {
				t.Errorf("response before the end")
			}
		case ErrorType:
			if m.Retryable == nil || m.Code == "" || m.CapabilityName != "tool" {
				t.Errorf("error %s", l)
			}
		default:
			t.Errorf("type %q", m.Type)
		}
	}
}
