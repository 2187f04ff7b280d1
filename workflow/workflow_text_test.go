package workflow

import (
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestWorkflowTextNotInflated: an array workflow is written as the JSONL
// the worker measures and reads without HTML escaping: a message padded
// with '<' is as long as sent. It was six times longer (\u003c): a
// 300 KB workflow passed POST /a2e and the worker refused it as over
// MaxWorkflowBytes. U+2028, which encoding/json always escapes, is
// written \u2028 (what the doors measure).
func TestWorkflowTextNotInflated(t *testing.T) {
	op := `{"operation":{"Wait":{"duration":1}},"operationId":"w","pad":"` + strings.Repeat("<", 300_000) + `","type":"operationUpdate"}`
	begin := `{"executionId":"e","operationOrder":["w"],"type":"beginExecution"}`
	var arr []any
	if err := e2a.DecodeStrict([]byte("["+op+","+begin+"]"), &arr); err != nil {
		t.Fatal(err)
	}
	text, err := WorkflowText(&e2a.Envelope{Params: map[string]any{ParamWorkflow: arr}})
	if want := op + "\n" + begin + "\n"; err != nil || text != want {
		t.Fatalf("WorkflowText of a 300 KB array padded with '<': %d bytes (%v), want the %d sent", len(text), err, len(want))
	}
	if _, res := New(Options{}).Validate("alice", text); !res.Valid {
		t.Errorf("the worker refuses it: %+v", res.Errors)
	}
	sep := []any{map[string]any{"pad": "\u2028"}}
	if text, err := WorkflowText(&e2a.Envelope{Params: map[string]any{ParamWorkflow: sep}}); err != nil || text != `{"pad":"\u2028"}`+"\n" {
		t.Errorf("WorkflowText of U+2028: %q %v, want it escaped", text, err)
	}
}
