package workflow

import "testing"

// TestBrokenOperationReportedOnce: an operation that cannot be used (an
// unknown type, no operation object, two keys) is one error, its root
// cause: the references to it (operationOrder, a Conditional's branch, a
// Loop) and the reads of what it writes are not errors of their own. They
// were: undefined_operation for every reference, unresolved_path for every
// read of its outputPath.
func TestBrokenOperationReportedOnce(t *testing.T) {
	e := New(Options{Policy: examplePolicy(t, "api.example.com")})
	for name, tc := range map[string]struct{ body, code string }{
		"unknown type":      {`{"Exec":{"cmd":"rm","outputPath":"/workflow/x"}}`, CodeUnknownOperation},
		"no object":         {`"ApiCall"`, CodeInvalidField},
		"two keys":          {`{"Wait":{"duration":1},"Exec":{"outputPath":"/workflow/x"}}`, CodeInvalidField},
		"config not object": {`{"Wait":5}`, CodeInvalidField},
	} {
		wf := lines(
			op("x", tc.body),
			op("f", `{"FilterData":{"inputPath":"/workflow/x","conditions":[{"field":"a","operator":"==","value":1}],"outputPath":"/workflow/f"}}`),
			op("c", `{"Conditional":{"condition":{"path":"/workflow/f","operator":"!=","value":null},"ifTrue":["x"],"ifFalse":["l"]}}`),
			op("l", `{"Loop":{"inputPath":"/workflow/f","operations":["x"]}}`),
			begin("x", "f", "c"))
		_, res := e.Validate("agent-1", wf)
		if res.Valid || len(res.Errors) != 1 || res.Errors[0].Code != tc.code || res.Errors[0].OperationID != "x" || res.Errors[0].Line != 1 {
			t.Errorf("%s: want the one %s error of operation x, got %+v", name, tc.code, res.Errors)
		}
	}
	// An operation that is never defined is still reported where it is named.
	_, res := e.Validate("agent-1", lines(op("x", `{"Exec":{}}`), begin("x", "ghost")))
	if len(res.Errors) != 2 || res.Errors[1].Code != CodeUndefinedReference || res.Errors[1].OperationID != "ghost" {
		t.Errorf("undefined ghost beside a broken x: %+v", res.Errors)
	}
}
