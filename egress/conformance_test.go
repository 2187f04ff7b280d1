package egress_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	. "github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// rendererCase is one renderer under the suite: how to build it, and what
// its output must satisfy beyond the golden bytes.
type rendererCase struct {
	name string
	sse  bool
	// format is the output format (Formats) the renderer writes.
	format string
	make   func(o *render.Output, sc conformance.Scenario) render.Renderer
	check  func(t *testing.T, sc conformance.Scenario, status int, body []byte)
}

// conformanceFormats returns, for each output format, the renderer cases
// of the conformance suite that write it (their golden files are under
// testdata/<case>/): the registry's completeness check reads it.
func conformanceFormats() map[string][]string {
	out := map[string][]string{}
	for _, rc := range renderers() {
		out[rc.format] = append(out[rc.format], rc.name)
	}
	return out
}

func reqID(sc conformance.Scenario) string { return sc.RequestID() }

func renderers() []rendererCase {
	return []rendererCase{
		{name: "e2a_sse", format: FormatE2ASSE, sse: true, make: func(o *render.Output, sc conformance.Scenario) render.Renderer {
			return NewE2ASSE(o, 2*time.Second, "")
		},
			check: checkE2ASSE},
		{name: "e2a_ndjson", format: FormatE2ANDJSON, make: func(o *render.Output, sc conformance.Scenario) render.Renderer { return NewE2ANDJSON(o) }, check: checkE2ANDJSON},
		{name: "e2a_json", format: FormatE2AJSON, make: func(o *render.Output, sc conformance.Scenario) render.Renderer {
			return NewE2AJSON(o, reqID(sc), []byte(`{"request_id":"`+reqID(sc)+`","method":"chat.send"}`), sc.Final, sc.From)
		}, check: checkE2AJSON},
	}
}

// TestRendererConformance runs every renderer through every scenario of
// the kit's suite (conformance.TestRenderers: the golden files
// testdata/<renderer>/<scenario>.golden, which go test -run Conformance
// -update rewrites, and what every renderer must do whatever its format),
// then each renderer's own checks.
func TestRendererConformance(t *testing.T) {
	var cases []conformance.Case
	for _, rc := range renderers() {
		cases = append(cases, conformance.Case{Name: rc.name, SSE: rc.sse, New: rc.make,
			Check: func(t *testing.T, sc conformance.Scenario, run *conformance.Result) {
				rc.check(t, sc, run.Status, run.Body)
			}})
	}
	conformance.TestRenderers(t, *update, cases...)
}

func sseData(t *testing.T, body []byte) []testkit.SSEEvent {
	var evs []testkit.SSEEvent
	for _, ev := range testkit.MustReadSSE(t, bytes.NewReader(body)) {
		if !ev.Comment {
			evs = append(evs, ev)
		}
	}
	return evs
}

func ndjsonLines(t *testing.T, body []byte) [][]byte {
	t.Helper()
	out, err := conformance.NDJSONLines(body)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func wantErr(sc conformance.Scenario) error {
	for _, st := range sc.Steps {
		if st.Kind == "end" {
			return st.Err
		}
	}
	return nil
}

func rendered(sc conformance.Scenario) []*e2a.Response {
	var out []*e2a.Response
	for _, st := range sc.Steps {
		if st.Kind == "frame" {
			out = append(out, sc.Frames[st.Frame])
		}
	}
	return out
}

func checkE2ASSE(t *testing.T, sc conformance.Scenario, status int, body []byte) {
	if err := wantErr(sc); err != nil && len(rendered(sc)) == 0 {
		st, _ := Classify(err)
		if status != st {
			t.Errorf("status %d, want %d", status, st)
		}
		return
	}
	evs := sseData(t, body)
	fr := rendered(sc)
	for i, f := range fr {
		if evs[i].ID != fmt.Sprint(f.Sequence) || evs[i].Event != f.ResponseKind {
			t.Errorf("event %d: %+v", i, evs[i])
		}
	}
	if wantErr(sc) != nil && evs[len(evs)-1].Event != "error" {
		t.Errorf("no error event")
	}
}

func checkE2ANDJSON(t *testing.T, sc conformance.Scenario, status int, body []byte) {
	lines := ndjsonLines(t, body)
	fr := rendered(sc)
	for i, f := range fr {
		r, err := e2a.ResponseFromJSON(lines[i])
		if err != nil || r.Sequence != f.Sequence {
			t.Errorf("line %d: %v", i, err)
		}
	}
	if wantErr(sc) != nil && len(lines) != len(fr)+1 {
		t.Errorf("no error line")
	}
}

func checkE2AJSON(t *testing.T, sc conformance.Scenario, status int, body []byte) {
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if wantErr(sc) != nil && len(rendered(sc)) == 0 {
		if v["error"] == nil || status != 404 {
			t.Errorf("status %d body %v", status, v)
		}
		return
	}
	var view RequestView
	_ = json.Unmarshal(body, &view)
	if len(view.Frames) != len(rendered(sc)) {
		t.Errorf("%d frames", len(view.Frames))
	}
	if sc.Final != (status == 200) {
		t.Errorf("status %d for final=%v", status, sc.Final)
	}
}
