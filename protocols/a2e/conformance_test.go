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

// TestRendererConformance runs the renderer through the kit's suite
// (conformance.TestRenderers: its output step by step against
// testdata/a2e_ndjson/<scenario>.golden, which go test -run Conformance
// -update rewrites), then checks its lines.
func TestRendererConformance(t *testing.T) {
	old, oldID := now, newID
	now = conformance.Time
	// The lines not taken from a frame get a new id each: fixed here.
	newID = func() string { return "0195f3e8c9a07b3f8e2d1c4b5a697887" }
	defer func() { now, newID = old, oldID }()
	conformance.TestRenderers(t, *update, conformance.Case{Name: rendererCase,
		New: func(o *render.Output, _ conformance.Scenario) render.Renderer {
			return NewRenderer(o, Params{ReqID: "a1b2c3", ReqType: "tool/call/req"})
		},
		Check: func(t *testing.T, _ conformance.Scenario, run *conformance.Result) { checkLines(t, run.Body) }})
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
		case "ping": // a heartbeat
		default:
			t.Errorf("type %q", m.Type)
		}
	}
}
