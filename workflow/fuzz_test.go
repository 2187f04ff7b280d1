package workflow

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// allowAll is a CallLimiter that never refuses (the fake clock never
// moves the real limiter's windows on).
type allowAll struct{}

func (allowAll) AllowCall(context.Context, string) (bool, time.Duration, error) { return true, 0, nil }

// fuzzSeeds are the spec's examples and a workflow using every operation
// type, with the API at https://api.example.com.
func fuzzSeeds() []string {
	return []string{example1, example2, example3, lines(
		op("fetch", `{"ApiCall":{"method":"GET","url":"https://api.example.com/users","outputPath":"/workflow/users"}}`),
		op("active", `{"FilterData":{"inputPath":"/workflow/users","conditions":[{"field":"status","operator":"==","value":"active"},{"field":"points","operator":">","value":60}],"outputPath":"/workflow/active"}}`),
		op("sorted", `{"TransformData":{"inputPath":"/workflow/active","transform":"sort","config":{"field":"name","order":"desc"},"outputPath":"/workflow/sorted"}}`),
		op("names", `{"TransformData":{"inputPath":"/workflow/sorted","transform":"map","config":{"field":"name"},"outputPath":"/workflow/names"}}`),
		op("total", `{"TransformData":{"inputPath":"/workflow/users","transform":"aggregate","config":{"operation":"sum","field":"points"},"outputPath":"/workflow/total"}}`),
		op("picked", `{"TransformData":{"inputPath":"/workflow/users","transform":"select","config":{"fields":["name","tags[0]"]},"outputPath":"/workflow/picked"}}`),
		op("each", `{"Loop":{"inputPath":"/workflow/active","operations":["profile"],"outputPath":"/workflow/profiles"}}`),
		op("profile", `{"ApiCall":{"method":"POST","url":"https://api.example.com/users/{/workflow/_loop/item.id}","body":{"n":"{/workflow/_loop/item.name}"},"outputPath":"/workflow/profile"}}`),
		op("merged", `{"MergeData":{"sources":["/workflow/active","/workflow/profiles"],"strategy":"deepMerge","outputPath":"/workflow/merged"}}`),
		op("big", `{"Conditional":{"condition":{"path":"/workflow/total","operator":">=","value":200},"ifTrue":["save"],"ifFalse":["pause"]}}`),
		op("save", `{"StoreData":{"inputPath":"/workflow/names","storage":"file","key":"reports/names.json"}}`),
		op("pause", `{"Wait":{"duration":2500}}`),
		begin("fetch", "active", "sorted", "names", "total", "picked", "each", "merged", "big"))}
}

// FuzzExecute: any workflow text a client sends to
// /api/v1/workflows/validate or execute, run on any data an API answers.
// Validation never panics and its report is consistent (valid exactly
// when there is no error; every issue with a line, a code and a message).
// A valid workflow runs to an outcome, never a panic or a hang: succeeded
// without an error, or failed with an error of a spec §8 type and a
// message, encodable as JSON; and running it again on the same data gives
// the same outcome.
func FuzzExecute(f *testing.F) {
	// The API answers every call with the case's data: the operations
	// after an ApiCall work on any data.
	api := testkit.NewAnswerer(f, "application/json", nil)
	dir := f.TempDir()
	for _, s := range fuzzSeeds() {
		f.Add(s, []byte(users))
		f.Add(s, []byte(`{"value":42}`))
	}
	f.Add(example3, []byte(`3`))
	f.Fuzz(func(t *testing.T, text string, data []byte) {
		text = strings.ReplaceAll(text, "https://api.example.com", api.URL)
		api.Set(data)
		first := runFuzzWorkflow(t, dir, text)
		if first == "" {
			return
		}
		if again := runFuzzWorkflow(t, dir, text); again != first {
			t.Fatalf("the same workflow on the same data gave two outcomes:\n%s\n%s", first, again)
		}
	})
}

// runFuzzWorkflow validates text and, when valid, runs it and returns its
// outcome as JSON ("" for an invalid workflow).
func runFuzzWorkflow(t *testing.T, dir, text string) string {
	e := New(Options{Policy: examplePolicy(t, "127.0.0.1"), Clock: newFakeClock(), Cache: NoCache{},
		Limiter: allowAll{}, Storage: &Stores{Dir: dir}, Retry: RetryPolicy{MaxRetries: -1}})
	defer e.transport.CloseIdleConnections() // an executor a case: its connections go with it
	wf, res := e.Validate("agent-1", text)
	checkReport(t, res)
	if !res.Valid {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := e.Execute(ctx, "agent-1", "req-1", wf, nil)
	if err != nil {
		t.Fatalf("Execute (no observer): %v", err)
	}
	switch {
	case out.Status == StatusSuccess && out.Error == nil:
	case out.Status == StatusFailed && out.Error != nil && out.Error.Message != "":
		switch out.Error.Type {
		case ValidationError, PermissionError, ExecutionError, TimeoutError, DataError:
		default:
			t.Fatalf("error type %q: %+v", out.Error.Type, out.Error)
		}
	default:
		t.Fatalf("outcome %s with error %+v", out.Status, out.Error)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatalf("outcome not JSON: %v", err)
	}
	return string(b)
}

// checkReport checks that a validation report is consistent.
func checkReport(t *testing.T, res ValidationResult) {
	t.Helper()
	if res.Valid != (len(res.Errors) == 0) {
		t.Fatalf("valid %v with %d errors", res.Valid, len(res.Errors))
	}
	for _, is := range append(append([]Issue(nil), res.Errors...), res.Warnings...) {
		if is.Line < 1 || is.Code == "" || is.Message == "" {
			t.Fatalf("issue %+v", is)
		}
	}
}
