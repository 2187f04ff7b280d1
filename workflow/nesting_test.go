package workflow

import (
	"fmt"
	"testing"
)

// nested is a workflow of depth Conditionals, each holding the next, the
// innermost holding a Wait.
func nested(depth int) string {
	ls := []string{op("leaf", `{"Wait":{"duration":0}}`)}
	for l := depth - 1; l >= 0; l-- {
		next := "leaf"
		if l < depth-1 {
			next = fmt.Sprintf("c%d", l+1)
		}
		ls = append(ls, op(fmt.Sprintf("c%d", l), fmt.Sprintf(`{"Conditional":{"condition":{"path":"/workflow","operator":"!=","value":null},"ifTrue":[%q]}}`, next)))
	}
	return lines(append(ls, begin("c0"))...)
}

// TestNestingLimit: Limits.MaxNesting (8) bounds how deep Conditionals and
// Loops nest. Eight nested Conditionals holding a Wait were refused,
// "Conditional and Loop nest deeper than 8" said of the Wait: only seven
// could nest. Eight are valid; a ninth is refused, named.
func TestNestingLimit(t *testing.T) {
	if res := Validate(nested(8)); !res.Valid {
		t.Errorf("8 nested Conditionals: %+v", res.Errors)
	}
	res := Validate(nested(9))
	if res.Valid || len(res.Errors) != 1 || res.Errors[0].Code != CodeLimit || res.Errors[0].OperationID != "c8" {
		t.Errorf("9 nested Conditionals: valid %v %+v, want one limit error on c8", res.Valid, res.Errors)
	}
}
