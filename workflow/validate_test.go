package workflow

import (
	"fmt"
	"strings"
	"testing"
)

// Spec examples (a2e-workflow-protocol.md §13 and §3).
const (
	example1 = `{"type":"operationUpdate","operationId":"fetch-data","operation":{"ApiCall":{"method":"GET","url":"https://api.example.com/data","outputPath":"/workflow/data"}}}
{"type":"beginExecution","executionId":"exec-1","operationOrder":["fetch-data"]}`
	example2 = `{"type":"operationUpdate","operationId":"fetch-users","operation":{"ApiCall":{"method":"GET","url":"https://api.example.com/users","outputPath":"/workflow/users"}}}
{"type":"operationUpdate","operationId":"filter-active","operation":{"FilterData":{"inputPath":"/workflow/users","conditions":[{"field":"status","operator":"==","value":"active"}],"outputPath":"/workflow/active-users"}}}
{"type":"beginExecution","executionId":"exec-2","operationOrder":["fetch-users","filter-active"]}`
	example3 = `{"type":"operationUpdate","operationId":"check-count","operation":{"ApiCall":{"method":"GET","url":"https://api.example.com/count","outputPath":"/workflow/count"}}}
{"type":"operationUpdate","operationId":"process-if-needed","operation":{"Conditional":{"condition":{"path":"/workflow/count","operator":">","value":0},"ifTrue":["process-data"],"ifFalse":["skip"]}}}
{"type":"beginExecution","executionId":"exec-3","operationOrder":["check-count","process-if-needed"]}`
)

func examplePolicy(t testing.TB, hosts ...string) *Policy {
	t.Helper()
	p := &Policy{}
	if err := p.AllowHosts(hosts...); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSpecExamplesValidate(t *testing.T) {
	e := New(Options{Policy: examplePolicy(t, "api.example.com")})
	for i, ex := range []string{example1, example2} {
		_, res := e.Validate("agent-1", ex)
		if !res.Valid || len(res.Warnings) != 0 {
			t.Errorf("example %d: %+v", i+1, res)
		}
	}
	// Example 3 references operations it never defines: reported, with
	// the Conditional's line and id.
	_, res := e.Validate("agent-1", example3)
	if res.Valid || len(res.Errors) != 2 {
		t.Fatalf("example 3: %+v", res)
	}
	for _, is := range res.Errors {
		if is.Line != 2 || is.OperationID != "process-if-needed" || is.Code != CodeUndefinedReference {
			t.Errorf("example 3 issue %+v", is)
		}
	}
	// without a policy entry the host is refused
	_, res = New(Options{}).Validate("agent-1", example1)
	if res.Valid || res.Errors[0].Code != CodePermission || res.Errors[0].Line != 1 || res.Errors[0].OperationID != "fetch-data" {
		t.Errorf("no policy: %+v", res)
	}
}

func op(id, body string) string {
	return fmt.Sprintf(`{"type":"operationUpdate","operationId":%q,"operation":%s}`, id, body)
}

func begin(ids ...string) string {
	return fmt.Sprintf(`{"type":"beginExecution","executionId":"e1","operationOrder":["%s"]}`, strings.Join(ids, `","`))
}

func lines(ls ...string) string { return strings.Join(ls, "\n") }

const apiOK = `{"ApiCall":{"method":"GET","url":"https://api.example.com/users","outputPath":"/workflow/users"}}`

func TestValidationErrors(t *testing.T) {
	e := New(Options{Policy: examplePolicy(t, "api.example.com")})
	for _, tc := range []struct {
		name, wf string
		line     int
		opID     string
		code     string
		field    string // substring of the issue's field
	}{
		{"not json", lines(op("a", apiOK), `{nope`, begin("a")), 2, "", CodeInvalidJSON, ""},
		{"not an object", lines(`[1]`), 1, "", CodeInvalidMessage, ""},
		{"unknown type", lines(op("a", apiOK), `{"type":"launch"}`, begin("a")), 2, "", CodeUnknownMessageType, "type"},
		{"bad op id", lines(op("a b", apiOK), begin("a")), 1, "a b", CodeInvalidID, "operationId"},
		{"two keys", lines(op("a", `{"ApiCall":{},"Wait":{}}`), begin("a")), 1, "a", CodeInvalidField, "operation"},
		{"unknown op", lines(op("a", `{"Exec":{"cmd":"rm"}}`), begin("a")), 1, "a", CodeUnknownOperation, "operation"},
		{"missing url", lines(op("a", `{"ApiCall":{"method":"GET","outputPath":"/workflow/x"}}`), begin("a")), 1, "a", CodeMissingField, "ApiCall.url"},
		{"bad method", lines(op("a", `{"ApiCall":{"method":"TRACE","url":"https://api.example.com/","outputPath":"/workflow/x"}}`), begin("a")), 1, "a", CodeInvalidField, "method"},
		{"bad scheme", lines(op("a", `{"ApiCall":{"method":"GET","url":"file:///etc/passwd","outputPath":"/workflow/x"}}`), begin("a")), 1, "a", CodeInvalidField, "url"},
		{"userinfo", lines(op("a", `{"ApiCall":{"method":"GET","url":"https://u:p@api.example.com/","outputPath":"/workflow/x"}}`), begin("a")), 1, "a", CodeInvalidField, "url"},
		{"ref in host", lines(op("a", apiOK), op("b", `{"ApiCall":{"method":"GET","url":"https://{/workflow/users}/x","outputPath":"/workflow/x"}}`), begin("a", "b")), 2, "b", CodeInvalidField, "url"},
		{"bad output path", lines(op("a", `{"ApiCall":{"method":"GET","url":"https://api.example.com/","outputPath":"users"}}`), begin("a")), 1, "a", CodeInvalidField, "outputPath"},
		{"reserved output", lines(op("a", `{"ApiCall":{"method":"GET","url":"https://api.example.com/","outputPath":"/workflow/_loop"}}`), begin("a")), 1, "a", CodeInvalidField, "outputPath"},
		{"bad timeout", lines(op("a", `{"ApiCall":{"method":"GET","url":"https://api.example.com/","outputPath":"/workflow/x","timeout":-5}}`), begin("a")), 1, "a", CodeInvalidField, "timeout"},
		// 1e300 ms became a negative duration: the call failed at once with a TimeoutError
		{"huge timeout", lines(op("a", `{"ApiCall":{"method":"GET","url":"https://api.example.com/","outputPath":"/workflow/x","timeout":1e300}}`), begin("a")), 1, "a", CodeInvalidField, "timeout"},
		{"timeout over a day", lines(op("a", `{"ApiCall":{"method":"GET","url":"https://api.example.com/","outputPath":"/workflow/x","timeout":86400001}}`), begin("a")), 1, "a", CodeInvalidField, "timeout"},
		{"forbidden header", lines(op("a", `{"ApiCall":{"method":"GET","url":"https://api.example.com/","outputPath":"/workflow/x","headers":{"Host":"evil"}}}`), begin("a")), 1, "a", CodePermission, "headers.Host"},
		{"header line break", lines(op("a", `{"ApiCall":{"method":"GET","url":"https://api.example.com/","outputPath":"/workflow/x","headers":{"X":"a\r\nB: c"}}}`), begin("a")), 1, "a", CodeInvalidField, "headers.X"},
		// a control character, or a credential's prefix with a line break,
		// validated and then failed every call (a DataError "line break"
		// for a NUL, an ExecutionError of net/http for the others)
		{"header NUL", lines(op("a", `{"ApiCall":{"method":"GET","url":"https://api.example.com/","outputPath":"/workflow/x","headers":{"X":"a\u0000b"}}}`), begin("a")), 1, "a", CodeInvalidField, "headers.X"},
		{"header DEL", lines(op("a", `{"ApiCall":{"method":"GET","url":"https://api.example.com/","outputPath":"/workflow/x","headers":{"X":"a\u007fb"}}}`), begin("a")), 1, "a", CodeInvalidField, "headers.X"},
		{"credential prefix line break", lines(op("a", `{"ApiCall":{"method":"GET","url":"https://api.example.com/","outputPath":"/workflow/x","headers":{"Authorization":{"credentialRef":{"id":"nope"},"prefix":"Bearer\r\nX: "}}}}`), begin("a")), 1, "a", CodeInvalidField, "headers.Authorization.prefix"},
		{"bad operator", lines(op("a", apiOK), op("f", `{"FilterData":{"inputPath":"/workflow/users","conditions":[{"field":"x","operator":"~=","value":1}],"outputPath":"/workflow/f"}}`), begin("a", "f")), 2, "f", CodeInvalidField, "conditions[0].operator"},
		{"in needs array", lines(op("a", apiOK), op("f", `{"FilterData":{"inputPath":"/workflow/users","conditions":[{"field":"x","operator":"in","value":1}],"outputPath":"/workflow/f"}}`), begin("a", "f")), 2, "f", CodeTypeMismatch, "conditions[0].value"},
		{"empty conditions", lines(op("a", apiOK), op("f", `{"FilterData":{"inputPath":"/workflow/users","conditions":[],"outputPath":"/workflow/f"}}`), begin("a", "f")), 2, "f", CodeInvalidField, "conditions"},
		{"bad transform", lines(op("a", apiOK), op("t", `{"TransformData":{"inputPath":"/workflow/users","transform":"eval","outputPath":"/workflow/t"}}`), begin("a", "t")), 2, "t", CodeInvalidField, "transform"},
		{"group needs field", lines(op("a", apiOK), op("t", `{"TransformData":{"inputPath":"/workflow/users","transform":"group","config":{},"outputPath":"/workflow/t"}}`), begin("a", "t")), 2, "t", CodeMissingField, "config.field"},
		{"aggregate fn", lines(op("a", apiOK), op("t", `{"TransformData":{"inputPath":"/workflow/users","transform":"aggregate","config":{"operation":"median","field":"x"},"outputPath":"/workflow/t"}}`), begin("a", "t")), 2, "t", CodeInvalidField, "config.operation"},
		{"bad storage", lines(op("a", apiOK), op("s", `{"StoreData":{"inputPath":"/workflow/users","storage":"s3","key":"k"}}`), begin("a", "s")), 2, "s", CodeInvalidField, "storage"},
		{"storage key traversal", lines(op("a", apiOK), op("s", `{"StoreData":{"inputPath":"/workflow/users","storage":"localStorage","key":"../etc/passwd"}}`), begin("a", "s")), 2, "s", CodeInvalidField, "key"},
		{"wait negative", lines(op("w", `{"Wait":{"duration":-1}}`), begin("w")), 1, "w", CodeInvalidField, "duration"},
		{"merge strategy", lines(op("a", apiOK), op("m", `{"MergeData":{"sources":["/workflow/users"],"strategy":"zip","outputPath":"/workflow/m"}}`), begin("a", "m")), 2, "m", CodeInvalidField, "strategy"},
		{"no begin", lines(op("a", apiOK)), 1, "", CodeMissingBegin, ""},
		{"after begin", lines(op("a", apiOK), begin("a"), op("b", apiOK)), 3, "b", CodeAfterBegin, ""},
		{"bad execution id", lines(op("a", apiOK), `{"type":"beginExecution","executionId":"e 1","operationOrder":["a"]}`), 2, "", CodeInvalidID, "executionId"},
		{"empty order", lines(op("a", apiOK), `{"type":"beginExecution","executionId":"e1","operationOrder":[]}`), 2, "", CodeInvalidField, "operationOrder"},
		{"undefined in order", lines(op("a", apiOK), begin("a", "ghost")), 2, "ghost", CodeUndefinedReference, "operationOrder[1]"},
		{"unresolved path", lines(op("f", `{"FilterData":{"inputPath":"/workflow/users","conditions":[{"field":"x","operator":"==","value":1}],"outputPath":"/workflow/f"}}`), begin("f")), 1, "f", CodeUnresolvedPath, ""},
		{"read before write", lines(op("a", apiOK), op("f", `{"FilterData":{"inputPath":"/workflow/users","conditions":[{"field":"x","operator":"==","value":1}],"outputPath":"/workflow/f"}}`), begin("f", "a")), 2, "f", CodeUnresolvedPath, ""},
		{"url ref unresolved", lines(op("a", `{"ApiCall":{"method":"GET","url":"https://api.example.com/users/{/workflow/id}","outputPath":"/workflow/u"}}`), begin("a")), 1, "a", CodeUnresolvedPath, ""},
		{"loop var outside loop", lines(op("f", `{"FilterData":{"inputPath":"/workflow/_loop/item","conditions":[{"field":"x","operator":"==","value":1}],"outputPath":"/workflow/f"}}`), begin("f")), 1, "f", CodeUnresolvedPath, ""},
		{"cycle", lines(op("a", apiOK), op("c", `{"Conditional":{"condition":{"path":"/workflow/users","operator":"!=","value":null},"ifTrue":["c"]}}`), begin("a", "c")), 2, "c", CodeCycle, ""},
		{"undefined child", lines(op("a", apiOK), op("l", `{"Loop":{"inputPath":"/workflow/users","operations":["ghost"]}}`), begin("a", "l")), 2, "l", CodeUndefinedReference, ""},
		{"type mismatch", lines(op("a", apiOK), op("g", `{"TransformData":{"inputPath":"/workflow/users","transform":"group","config":{"field":"s"},"outputPath":"/workflow/g"}}`),
			op("f", `{"FilterData":{"inputPath":"/workflow/g","conditions":[{"field":"x","operator":"==","value":1}],"outputPath":"/workflow/f"}}`), begin("a", "g", "f")), 3, "f", CodeTypeMismatch, "inputPath"},
		{"wait over budget", lines(op("w", `{"Wait":{"duration":40000}}`), begin("w")), 2, "", CodeLimit, "operationOrder"},
		{"host not allowed", lines(op("a", `{"ApiCall":{"method":"GET","url":"https://evil.example.org/","outputPath":"/workflow/x"}}`), begin("a")), 1, "a", CodePermission, "url"},
		{"unknown credential", lines(op("a", `{"ApiCall":{"method":"GET","url":"https://api.example.com/","outputPath":"/workflow/x","headers":{"Authorization":{"credentialRef":{"id":"nope"}}}}}`), begin("a")), 1, "a", CodePermission, "headers.Authorization"},
		{"store disabled", lines(op("a", apiOK), op("s", `{"StoreData":{"inputPath":"/workflow/users","storage":"localStorage","key":"k"}}`), begin("a", "s")), 2, "s", CodePermission, "storage"},
	} {
		_, res := e.Validate("agent-1", tc.wf)
		if res.Valid {
			t.Errorf("%s: valid", tc.name)
			continue
		}
		found := false
		for _, is := range res.Errors {
			if is.Line == tc.line && is.OperationID == tc.opID && is.Code == tc.code && strings.Contains(is.Field, tc.field) {
				found = true
				if !strings.HasPrefix(is.Message, fmt.Sprintf("line %d", tc.line)) || (tc.opID != "" && !strings.Contains(is.Message, tc.opID)) {
					t.Errorf("%s: message %q lacks the line or operation", tc.name, is.Message)
				}
			}
		}
		if !found {
			t.Errorf("%s: want line %d op %q code %s field ~%q, got %+v", tc.name, tc.line, tc.opID, tc.code, tc.field, res.Errors)
		}
	}
}

func TestValidationWarningsAndLimits(t *testing.T) {
	e := New(Options{Policy: examplePolicy(t, "api.example.com")})
	// unused operation, unknown property, maybe-unset path
	wf := lines(
		op("a", `{"ApiCall":{"method":"GET","url":"https://api.example.com/users","outputPath":"/workflow/users","extra":1}}`),
		op("unused", `{"Wait":{"duration":1}}`),
		op("b", `{"ApiCall":{"method":"GET","url":"https://api.example.com/b","outputPath":"/workflow/b"}}`),
		op("c", `{"Conditional":{"condition":{"path":"/workflow/users","operator":"!=","value":null},"ifTrue":["b"]}}`),
		op("f", `{"FilterData":{"inputPath":"/workflow/b","conditions":[{"field":"x","operator":"==","value":1}],"outputPath":"/workflow/f"}}`),
		begin("a", "c", "f"))
	_, res := e.Validate("agent-1", wf)
	if !res.Valid {
		t.Fatalf("errors: %+v", res.Errors)
	}
	codes := map[string]Issue{}
	for _, w := range res.Warnings {
		codes[w.Code] = w
	}
	if w := codes[CodeUnused]; w.OperationID != "unused" || w.Line != 2 {
		t.Errorf("unused warning: %+v", res.Warnings)
	}
	if w := codes[CodeUnknownField]; w.OperationID != "a" || w.Field != "operation.ApiCall.extra" {
		t.Errorf("unknown field warning: %+v", res.Warnings)
	}
	if w := codes[CodeMaybeUnresolved]; w.OperationID != "f" || w.Line != 5 {
		t.Errorf("maybe-unset warning: %+v", res.Warnings)
	}

	// maxOperations: the 21st operation is reported
	var ls []string
	for i := 0; i < 21; i++ {
		ls = append(ls, op(fmt.Sprintf("w%d", i), `{"Wait":{"duration":0}}`))
	}
	ls = append(ls, begin("w0"))
	_, res = e.Validate("agent-1", lines(ls...))
	if res.Valid || res.Errors[0].Code != CodeLimit || res.Errors[0].OperationID != "w20" || res.Errors[0].Line != 21 {
		t.Errorf("maxOperations: %+v", res.Errors)
	}

	// per-principal operation permissions
	pol := examplePolicy(t, "api.example.com")
	pol.Principals = map[string]PrincipalPolicy{"reader": {Operations: []string{OpFilterData}}}
	_, res = New(Options{Policy: pol}).Validate("reader", example2)
	if res.Valid || res.Errors[0].Code != CodePermission || res.Errors[0].OperationID != "fetch-users" {
		t.Errorf("operation permission: %+v", res.Errors)
	}

	// package-level Validate: structure and flow, no permissions
	if r := Validate(example2); !r.Valid {
		t.Errorf("Validate(example2): %+v", r)
	}

	// a JSON array of messages is accepted, elements numbered as lines
	arr := "[" + strings.Join([]string{op("a", apiOK), begin("a")}, ",") + "]"
	if _, r := e.Validate("agent-1", arr); !r.Valid {
		t.Errorf("array form: %+v", r)
	}
}

func TestRedefinition(t *testing.T) {
	wf, res := Parse(lines(op("a", `{"Wait":{"duration":5}}`), op("a", `{"Wait":{"duration":7}}`), begin("a")))
	if !res.Valid || len(res.Warnings) != 1 || res.Warnings[0].Code != CodeRedefined || res.Warnings[0].Line != 2 {
		t.Fatalf("%+v", res)
	}
	if wf.Operations["a"].Wait.Duration.Milliseconds() != 7 {
		t.Errorf("the later definition is not used")
	}
}
