package workflow

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// doubled is a workflow's first lines and operation order building
// /workflow/a, an array of 2^(n+1) empty objects, without any API: the
// data model itself, merged with itself, then doubled n times.
func doubled(n int) ([]string, []string) {
	ls := []string{
		op("seed", `{"MergeData":{"sources":["/workflow","/workflow"],"strategy":"concat","outputPath":"/workflow/a"}}`),
		op("dbl", `{"MergeData":{"sources":["/workflow/a","/workflow/a"],"strategy":"concat","outputPath":"/workflow/a"}}`),
	}
	order := []string{"seed"}
	for range n {
		order = append(order, "dbl")
	}
	return ls, order
}

// repeated lists s n times, each JSON-quoted, comma-separated.
func repeated(s string, n int) string {
	q := make([]string, n)
	for i := range q {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ",")
}

// TestReferencesBounded: an operation referencing one value of the data
// model again and again (500 MergeData sources, a body or a condition value
// of 500 references, a text with 500 references) built a merge, a body or a
// text 500 times that value before any check: 374 MB allocated for a
// 64 KB MaxDataBytes with MergeData's concat, and with the defaults (a
// 16 MiB data model, a 1 MiB workflow listing 50,000 references) the
// worker died of OOM with every execution on it. The values an operation
// references add up, counted once per reference, to at most MaxDataBytes.
func TestReferencesBounded(t *testing.T) {
	const limit = 64 << 10
	const n = 500
	text := "x" + strings.Repeat("{/workflow/a}", n)
	for _, tc := range []struct{ name, op string }{
		{"concat sources", `{"MergeData":{"sources":[` + repeated("/workflow/a", n) + `],"strategy":"concat","outputPath":"/workflow/b"}}`},
		{"deepMerge sources", `{"MergeData":{"sources":[` + repeated("/workflow/a", n) + `],"strategy":"deepMerge","outputPath":"/workflow/b"}}`},
		{"union sources", `{"MergeData":{"sources":[` + repeated("/workflow/a", n) + `],"strategy":"union","outputPath":"/workflow/b"}}`},
		{"filter value text", `{"FilterData":{"inputPath":"/workflow/a","conditions":[{"field":"x","operator":"==","value":"` + text + `"}],"outputPath":"/workflow/b"}}`},
		{"filter value array", `{"FilterData":{"inputPath":"/workflow/a","conditions":[{"field":"x","operator":"in","value":[` + repeated("{/workflow/a}", n) + `]}],"outputPath":"/workflow/b"}}`},
		{"conditional value text", `{"Conditional":{"condition":{"path":"/workflow/a","operator":"==","value":"` + text + `"},"ifTrue":["seed"]}}`},
		{"api body", `{"ApiCall":{"method":"POST","url":"https://api.example.com/echo-body","body":[` + repeated("{/workflow/a}", n) + `],"outputPath":"/workflow/b"}}`},
		{"api header", `{"ApiCall":{"method":"GET","url":"https://api.example.com/echo","headers":{"X-Big":"` + text + `"},"outputPath":"/workflow/b"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			en := newEnv(t, func(o *Options) { o.Cache, o.Limits.MaxDataBytes = NoCache{}, limit })
			ls, order := doubled(12)
			ls = append(ls, op("amp", tc.op))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			out, _ := en.run(t, lines(append(ls, begin(append(order, "amp")...))...))
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			if out.Status != StatusFailed || out.Error == nil || out.Error.Type != DataError || out.Error.OperationID != "amp" || out.Error.Retryable {
				t.Fatalf("outcome %s %+v: want amp's DataError, not retryable", out.Status, out.Error)
			}
			if alloc > 64*limit {
				t.Fatalf("allocated %d MB for a %d KB MaxDataBytes: the references were expanded before any check", alloc>>20, limit>>10)
			}
			if n := en.api.hit("POST /echo-body") + en.api.hit("GET /echo"); n != 0 {
				t.Errorf("the API was called %d times", n)
			}
		})
	}
	// The same value referenced a few times stays within the budget.
	en := newEnv(t, func(o *Options) { o.Cache, o.Limits.MaxDataBytes = NoCache{}, limit })
	ls, order := doubled(6)
	ls = append(ls, op("twice", `{"MergeData":{"sources":["/workflow/a","/workflow/a"],"strategy":"union","outputPath":"/workflow/b"}}`))
	out, _ := en.run(t, lines(append(ls, begin(append(order, "twice")...))...))
	if out.Status != StatusSuccess {
		t.Fatalf("a value merged with itself: %+v", out.Error)
	}
}

// TestDeadlineStopsFilterData: a FilterData whose "in" operand is an
// array of the data model compares every element with every element of
// the operand: 65,536 elements ran 14 s past a 1 s maxExecutionTime and
// answered success (a 16 MiB data model: hours of a worker's CPU). The
// filter stops at the execution's deadline with a TimeoutError.
func TestDeadlineStopsFilterData(t *testing.T) {
	ls, order := doubled(15)
	ls = append(ls, op("amp", `{"FilterData":{"inputPath":"/workflow/a","conditions":[{"field":"x","operator":"in","value":"{/workflow/a}"}],"outputPath":"/workflow/b"}}`))
	timesOutAt(t, Options{Cache: NoCache{}}, lines(append(ls, begin(append(order, "amp")...))...), "amp")
}

// TestDeadlineStopsMergeData: a deepMerge copies what it merged so far at
// each source: an API's object of 20,000 small members merged member by
// member (a 400 KB workflow) ran 14 s with a 1 s maxExecutionTime
// and answered success (40,000: 85 s). The merge stops at the execution's
// deadline with a TimeoutError.
func TestDeadlineStopsMergeData(t *testing.T) {
	const n = 20000
	var obj strings.Builder
	srcs := make([]string, n)
	obj.WriteString("{")
	for i := range n {
		if i > 0 {
			obj.WriteString(",")
		}
		fmt.Fprintf(&obj, `"k%d":{"k%d":0}`, i, i)
		srcs[i] = fmt.Sprintf("%q", fmt.Sprintf("/workflow/o.k%d", i))
	}
	obj.WriteString("}")
	body := obj.String()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	timesOutAt(t, Options{Policy: examplePolicy(t, "127.0.0.1"), Cache: NoCache{}}, lines(
		op("o", `{"ApiCall":{"method":"GET","url":"`+srv.URL+`/o","outputPath":"/workflow/o"}}`),
		op("m", `{"MergeData":{"sources":[`+strings.Join(srcs, ",")+`],"strategy":"deepMerge","outputPath":"/workflow/m"}}`),
		begin("o", "m")), "m")
}

// aggregations lists n aggregations of fn on field, named a0, a1, …
func aggregations(n int, fn, field string) string {
	q := make([]string, n)
	for i := range q {
		q[i] = fmt.Sprintf(`{"operation":%q,"field":%q,"as":"a%d"}`, fn, field, i)
	}
	return "[" + strings.Join(q, ",") + "]"
}

// TestAggregateBounded: an aggregate's output is its groups times its
// aggregations, and it was built whole before MaxDataBytes was checked:
// 256 groups (a Loop's indexes) times 2,000 aggregations allocated 89 MB
// for a 64 KB limit (an API's 100,000 distinct values and a 1 MiB
// workflow's 30,000 aggregations: an OOM). It stops at MaxDataBytes with a
// DataError.
func TestAggregateBounded(t *testing.T) {
	const limit = 64 << 10
	aggs := aggregations(2000, "count", "")
	ls, order := doubled(7)
	ls = append(ls,
		op("each", `{"Loop":{"inputPath":"/workflow/a","operations":["idx","obj"],"outputPath":"/workflow/ids"}}`),
		op("idx", `{"MergeData":{"sources":["/workflow/_loop/index"],"strategy":"concat","outputPath":"/workflow/i"}}`),
		op("obj", `{"TransformData":{"inputPath":"/workflow/i","transform":"map","config":{"fields":{"k":""}},"outputPath":"/workflow/o"}}`),
		op("amp", `{"TransformData":{"inputPath":"/workflow/ids","transform":"aggregate","config":{"groupBy":"[0].k","aggregations":`+aggs+`},"outputPath":"/workflow/b"}}`))
	e := New(Options{Cache: NoCache{}, Limits: Limits{MaxDataBytes: limit}})
	failsAt(t, e, lines(append(ls, begin(append(order, "each", "amp")...))...), DataError, "amp")
	// What the transform allocates before it refuses.
	ids := make([]any, 256)
	for i := range ids {
		ids[i] = []any{map[string]any{"k": numberValue(float64(i))}}
	}
	cfg, _ := j(t, `{"groupBy":"[0].k","aggregations":`+aggs+`}`).(map[string]any)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := transform(context.Background(), ids, "aggregate", cfg, limit)
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; err == nil || alloc > 64*limit {
		t.Fatalf("%v, allocated %d MB for a %d KB limit: the aggregate was built whole before the check", err, alloc>>20, limit>>10)
	}
	// An output of exactly the bytes left is built: the count as it grows
	// never exceeds the encoding.
	in := j(t, users)
	for _, cfg := range []string{
		`{"groupBy":"status","aggregations":[{"operation":"sum","field":"points"},{"operation":"max","field":"name","as":"last"},{"operation":"count","as":"last"}]}`,
		`{"groupBy":"status","operation":"count"}`,
		`{"aggregations":[{"operation":"avg","field":"points"},{"operation":"min","field":"name"}]}`,
	} {
		c, _ := j(t, cfg).(map[string]any)
		whole, err := transform(context.Background(), in, "aggregate", c, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		n := jsonSize(whole)
		if _, err := transform(context.Background(), in, "aggregate", c, n); err != nil {
			t.Errorf("%s with %d bytes left for its %d: %v", cfg, n, n, err)
		}
	}
}

// TestDeadlineStopsTransformData: each aggregation reads every element,
// select looks every field up in every element and copies the object
// selected so far at each, map's set copies the element at each constant:
// 2,000 sums or 2,000 fields over 65,536 elements ran 11 s past a 1 s
// maxExecutionTime and answered success (a 1 MiB workflow over a 16 MiB
// data model: hours; 20,000 constants over 16 elements: 215 s). The
// transform stops at the execution's deadline with a TimeoutError.
func TestDeadlineStopsTransformData(t *testing.T) {
	quoted := func(n int, format string) string {
		q := make([]string, n)
		for i := range q {
			q[i] = fmt.Sprintf(format, i)
		}
		return strings.Join(q, ",")
	}
	transformOf := func(in, config string) string {
		return `{"TransformData":{"inputPath":"` + in + `",` + config + `,"outputPath":"/workflow/b"}}`
	}
	for _, tc := range []struct {
		name      string
		doublings int
		ops       []string // the last one is "amp"
	}{
		{"aggregate", 15, []string{transformOf("/workflow/a", `"transform":"aggregate","config":{"aggregations":`+aggregations(2000, "sum", "x.y")+`}`)}},
		{"select", 15, []string{transformOf("/workflow/a", `"transform":"select","config":{"fields":[`+quoted(2000, `"f%d.g"`)+`]}`)}},
		{"map set", 3, []string{transformOf("/workflow/a", `"transform":"map","config":{"set":{`+quoted(5000, `"s%d":0`)+`}}`)}},
		// an object of 15,000 members (an aggregate's) selected whole
		{"select of one object", 0, []string{
			`{"TransformData":{"inputPath":"/workflow/a","transform":"aggregate","config":{"aggregations":` + aggregations(15000, "count", "") + `},"outputPath":"/workflow/o"}}`,
			transformOf("/workflow/o", `"transform":"select","config":{"fields":[`+quoted(15000, `"a%d"`)+`]}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls, order := doubled(tc.doublings)
			for i, o := range tc.ops {
				id := fmt.Sprintf("op%d", i)
				if i == len(tc.ops)-1 {
					id = "amp"
				}
				ls, order = append(ls, op(id, o)), append(order, id)
			}
			timesOutAt(t, Options{Cache: NoCache{}}, lines(append(ls, begin(order...))...), "amp")
		})
	}
}

// timesOutAt runs workflow wf (its lines) with an executor of opts and a
// maxExecutionTime of 1 s, and fails the test unless it ends with
// operation op's TimeoutError. The operations before op take well under
// a second, but on a loaded machine they may reach the deadline first:
// such a run says nothing of op, and is tried again with the deadline
// doubled, up to 8 s (op, unbounded, runs far past any).
func timesOutAt(t *testing.T, opts Options, wf, op string) {
	t.Helper()
	for deadline := time.Second; ; deadline *= 2 {
		opts.Limits.MaxExecutionTime = deadline
		out := outcome(t, New(opts), wf)
		if deadline < 8*time.Second && out.Error != nil && out.Error.Type == TimeoutError && out.Error.OperationID != op {
			t.Logf("%s reached the %v deadline before %s: again with %v", out.Error.OperationID, deadline, op, 2*deadline)
			continue
		}
		wantFailedAt(t, out, TimeoutError, op)
		return
	}
}

// failsAt validates workflow wf (its lines) with e, runs it, and fails
// the test unless it ends failed with operation op's error of type typ.
func failsAt(t *testing.T, e *Executor, wf, typ, op string) {
	t.Helper()
	wantFailedAt(t, outcome(t, e, wf), typ, op)
}

// outcome validates workflow wf (its lines) with e and runs it.
func outcome(t *testing.T, e *Executor, wf string) *Outcome {
	t.Helper()
	w, res := e.Validate("agent-1", wf)
	if !res.Valid {
		t.Fatalf("invalid: %+v", res.Errors)
	}
	out, err := e.Execute(context.Background(), "agent-1", "req-1", w, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// wantFailedAt fails the test unless out ended failed with operation
// op's error of type typ.
func wantFailedAt(t *testing.T, out *Outcome, typ, op string) {
	t.Helper()
	if out.Status != StatusFailed || out.Error == nil || out.Error.Type != typ || out.Error.OperationID != op {
		t.Fatalf("outcome %s %+v: want %s's %s", out.Status, out.Error, op, typ)
	}
}
