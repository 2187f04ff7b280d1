package workflow

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// j decodes JSON the way the executor does (numbers as json.Number).
func j(t testing.TB, s string) any {
	t.Helper()
	v, err := decodeJSON([]byte(s))
	if err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return v
}

func eqJSON(t testing.TB, got any, want string) {
	t.Helper()
	if canonical(got) != canonical(j(t, want)) {
		t.Errorf("got %s, want %s", canonical(got), canonical(j(t, want)))
	}
}

func TestParsePath(t *testing.T) {
	for _, tc := range []struct {
		in, canon string
		bad       bool
	}{
		{"/workflow", "/workflow", false},
		{"/workflow/users", "/workflow/users", false},
		{"/workflow/active-users", "/workflow/active-users", false},
		{"/workflow/users[0]", "/workflow/users[0]", false},
		{"/workflow/users[0].name", "/workflow/users[0].name", false},
		{"/workflow/a/b.c[2][3]", "/workflow/a.b.c[2][3]", false},
		{"/workflow/object.field", "/workflow/object.field", false},
		{"workflow/users", "", true},
		{"/other/users", "", true},
		{"/workflow/", "", true},
		{"/workflow/a..b", "", true},
		{"/workflow/a[", "", true},
		{"/workflow/a[-1]", "", true},
		{"/workflow/a[-0]", "", true}, // read as [0] (FuzzParsePath)
		{"/workflow/a[+1]", "", true},
		{"/workflow/a[007]", "/workflow/a[7]", false},
		{"/workflow/a[x]", "", true},
		{"/workflow/a b", "", true},
		{"/workflow/[0]", "", true},
		{"/workflowx", "", true},
	} {
		p, err := ParsePath(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("ParsePath(%q) accepted", tc.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParsePath(%q): %v", tc.in, err)
			continue
		}
		if p.canonical() != tc.canon {
			t.Errorf("ParsePath(%q) = %s, want %s", tc.in, p.canonical(), tc.canon)
		}
	}
}

func mustPath(t testing.TB, s string) Path {
	t.Helper()
	p, err := ParsePath(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDataGetSet(t *testing.T) {
	d := NewData()
	if err := d.Set(mustPath(t, "/workflow/users"), j(t, `[{"name":"a","tags":["x"]},{"name":"b"}]`)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"/workflow/users[0].name", `"a"`},
		{"/workflow/users[1]", `{"name":"b"}`},
		{"/workflow/users[0].tags[0]", `"x"`},
		{"/workflow/users/0", ``}, // "0" is a property name, not an index
	} {
		v, ok := d.Get(mustPath(t, tc.path))
		if tc.want == "" {
			if ok {
				t.Errorf("%s: found %v", tc.path, v)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: missing", tc.path)
			continue
		}
		eqJSON(t, v, tc.want)
	}
	// copy on write: a filtered array sharing elements is not changed
	users, _ := d.Get(mustPath(t, "/workflow/users"))
	_ = d.Set(mustPath(t, "/workflow/alias"), users)
	if err := d.Set(mustPath(t, "/workflow/users[0].name"), "z"); err != nil {
		t.Fatal(err)
	}
	alias, _ := d.Get(mustPath(t, "/workflow/alias[0].name"))
	if alias != "a" {
		t.Errorf("alias changed to %v", alias)
	}
	// nested creation and append
	if err := d.Set(mustPath(t, "/workflow/a.b.c"), json.Number("1")); err != nil {
		t.Fatal(err)
	}
	if err := d.Set(mustPath(t, "/workflow/users[2]"), "new"); err != nil {
		t.Fatal(err)
	}
	if err := d.Set(mustPath(t, "/workflow/users[9]"), "far"); err == nil {
		t.Error("set past the end accepted")
	}
	if err := d.Set(mustPath(t, "/workflow/a.b.c.d"), "x"); err == nil {
		t.Error("set a property on a number accepted")
	}
	eqJSON(t, d.Snapshot()["a"], `{"b":{"c":1}}`)
}

func TestOperators(t *testing.T) {
	for _, tc := range []struct {
		v, op, operand string
		want           bool
	}{
		{`"active"`, "==", `"active"`, true},
		{`"active"`, "==", `"Active"`, false},
		{`1`, "==", `1.0`, true},
		{`1`, "==", `"1"`, false},
		{`null`, "==", `null`, true},
		{`{"a":[1,2]}`, "==", `{"a":[1,2.0]}`, true},
		{`"a"`, "!=", `"b"`, true},
		{`3`, "!=", `3`, false},
		{`null`, "!=", `0`, true},
		{`150`, ">", `100`, true},
		{`100`, ">", `100`, false},
		{`"150"`, ">", `100`, true},
		{`"b"`, ">", `"a"`, true},
		{`null`, ">", `0`, false},
		{`{"x":1}`, ">", `0`, false},
		{`5`, "<", `10`, true},
		{`"2025-01-01"`, "<", `"2025-06-01"`, true},
		{`"abc"`, "<", `10`, false},
		{`10`, ">=", `10`, true},
		{`9.5`, ">=", `10`, false},
		{`10`, "<=", `10`, true},
		{`11`, "<=", `10`, false},
		{`"x"`, "in", `["x","y"]`, true},
		{`2`, "in", `[1,2.0]`, true},
		{`"z"`, "in", `["x","y"]`, false},
		{`"x"`, "in", `"xyz"`, false},
		{`"hello world"`, "contains", `"lo w"`, true},
		{`"hello"`, "contains", `"z"`, false},
		{`["a","b"]`, "contains", `"b"`, true},
		{`[1,2]`, "contains", `3`, false},
		{`{"k":1}`, "contains", `"k"`, true},
		{`42`, "contains", `"4"`, false},
		{`"prefix-x"`, "startsWith", `"prefix"`, true},
		{`"x-prefix"`, "startsWith", `"prefix"`, false},
		{`12`, "startsWith", `"1"`, false},
		{`"file.json"`, "endsWith", `".json"`, true},
		{`"file.txt"`, "endsWith", `".json"`, false},
		{`null`, "endsWith", `""`, false},
	} {
		got := evalOperator(j(t, tc.v), tc.op, j(t, tc.operand))
		if got != tc.want {
			t.Errorf("%s %s %s = %v, want %v", tc.v, tc.op, tc.operand, got, tc.want)
		}
	}
}

const users = `[
 {"id":1,"name":"Ann","status":"active","points":150,"tags":["vip"],"address":{"city":"Paris"}},
 {"id":2,"name":"bob","status":"inactive","points":50,"tags":[],"address":{"city":"Lyon"}},
 {"id":3,"name":"Cy","status":"active","points":90,"tags":["new"],"address":{"city":"Paris"}},
 {"id":4,"name":"Dee","status":"active","tags":["vip","new"]}
]`

func cond(field, op, value string) Condition {
	segs, _ := parseField(field)
	v, _ := decodeJSON([]byte(value))
	return Condition{Field: field, field: segs, Operator: op, Value: v}
}

func ids(t testing.TB, v any) string {
	t.Helper()
	var out []string
	for _, el := range v.([]any) {
		out = append(out, canonical(el.(map[string]any)["id"]))
	}
	return strings.Join(out, ",")
}

func TestFilterData(t *testing.T) {
	in := j(t, users)
	for _, tc := range []struct {
		name  string
		conds []Condition
		want  string
	}{
		{"==", []Condition{cond("status", "==", `"active"`)}, "1,3,4"},
		{"!=", []Condition{cond("status", "!=", `"active"`)}, "2"},
		{">", []Condition{cond("points", ">", `100`)}, "1"},
		{"<", []Condition{cond("points", "<", `100`)}, "2,3"},
		{">=", []Condition{cond("points", ">=", `90`)}, "1,3"},
		{"<=", []Condition{cond("points", "<=", `90`)}, "2,3"},
		{"in", []Condition{cond("id", "in", `[2,4]`)}, "2,4"},
		{"contains array", []Condition{cond("tags", "contains", `"vip"`)}, "1,4"},
		{"contains string", []Condition{cond("name", "contains", `"e"`)}, "4"},
		{"startsWith", []Condition{cond("name", "startsWith", `"C"`)}, "3"},
		{"endsWith", []Condition{cond("name", "endsWith", `"b"`)}, "2"},
		{"nested field", []Condition{cond("address.city", "==", `"Paris"`)}, "1,3"},
		{"index field", []Condition{cond("tags[0]", "==", `"vip"`)}, "1,4"},
		{"missing is null", []Condition{cond("points", "==", `null`)}, "4"},
		{"and", []Condition{cond("points", ">", `100`), cond("status", "==", `"active"`)}, "1"},
	} {
		out, err := filterArray(context.Background(), in, tc.conds)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := ids(t, out); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
	// scalars with an empty field
	out, _ := filterArray(context.Background(), j(t, `[1,5,10]`), []Condition{cond("", ">", `3`)})
	eqJSON(t, out, `[5,10]`)
	if _, err := filterArray(context.Background(), j(t, `{"a":1}`), nil); err == nil {
		t.Error("filter on an object accepted")
	}
}

func TestTransformData(t *testing.T) {
	in := j(t, users)
	for _, tc := range []struct {
		name, kind, cfg, want string
	}{
		{"map pluck", "map", `{"field":"name"}`, `["Ann","bob","Cy","Dee"]`},
		{"map fn on field", "map", `{"field":"name","fn":"toUpperCase"}`, `["ANN","BOB","CY","DEE"]`},
		{"map fields", "map", `{"fields":{"who":"name","city":"address.city"}}`,
			`[{"who":"Ann","city":"Paris"},{"who":"bob","city":"Lyon"},{"who":"Cy","city":"Paris"},{"who":"Dee","city":null}]`},
		{"map fn target", "map", `{"fields":{"id":"id"},"field":"tags","fn":"length","target":"ntags"}`,
			`[{"id":1,"ntags":1},{"id":2,"ntags":0},{"id":3,"ntags":1},{"id":4,"ntags":2}]`},
		{"map set", "map", `{"fields":{"id":"id"},"set":{"source":"crm","meta.v":2}}`,
			`[{"id":1,"source":"crm","meta":{"v":2}},{"id":2,"source":"crm","meta":{"v":2}},{"id":3,"source":"crm","meta":{"v":2}},{"id":4,"source":"crm","meta":{"v":2}}]`},
		{"sort desc", "sort", `{"field":"points","order":"desc"}`, `1,3,2,4`},
		{"sort asc", "sort", `{"field":"points"}`, `2,3,1,4`},
		{"sort by string", "sort", `{"field":"name"}`, `1,3,4,2`},
		{"group", "group", `{"field":"status"}`, ``},
		{"aggregate sum", "aggregate", `{"operation":"sum","field":"points"}`, `290`},
		{"aggregate avg", "aggregate", `{"operation":"avg","field":"points"}`, `96.66666666666667`},
		{"aggregate min", "aggregate", `{"operation":"min","field":"points"}`, `50`},
		{"aggregate max", "aggregate", `{"operation":"max","field":"name"}`, `"bob"`},
		{"aggregate count", "aggregate", `{"operation":"count"}`, `4`},
		{"aggregate count field", "aggregate", `{"operation":"count","field":"points"}`, `3`},
		{"aggregate many", "aggregate", `{"aggregations":[{"operation":"sum","field":"points","as":"total"},{"operation":"count"}]}`, `{"total":290,"count":4}`},
		{"aggregate groupBy", "aggregate", `{"groupBy":"status","operation":"sum","field":"points"}`, `{"active":240,"inactive":50}`},
		{"select", "select", `{"fields":["id","address.city"]}`, `[{"id":1,"address":{"city":"Paris"}},{"id":2,"address":{"city":"Lyon"}},{"id":3,"address":{"city":"Paris"}},{"id":4}]`},
	} {
		cfg, _ := j(t, tc.cfg).(map[string]any)
		out, err := transform(context.Background(), in, tc.kind, cfg, 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		switch {
		case tc.kind == "sort":
			if got := ids(t, out); got != tc.want {
				t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
			}
		case tc.kind == "group":
			g := out.(map[string]any)
			if got := ids(t, g["active"]) + "|" + ids(t, g["inactive"]); got != "1,3,4|2" {
				t.Errorf("group: %s", got)
			}
		default:
			eqJSON(t, out, tc.want)
		}
	}
	out, err := transform(context.Background(), j(t, `{"a":1,"b":{"c":2},"d":3}`), "select", map[string]any{"fields": []any{"a", "b.c"}}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	eqJSON(t, out, `{"a":1,"b":{"c":2}}`)
	for _, kind := range []string{"map", "sort", "group", "aggregate"} {
		if _, err := transform(context.Background(), j(t, `{"a":1}`), kind, map[string]any{"field": "a", "operation": "count"}, 1<<20); err == nil {
			t.Errorf("%s on an object accepted", kind)
		}
	}
}

func TestMergeData(t *testing.T) {
	for _, tc := range []struct {
		strategy, sources, want string
	}{
		{"concat", `[[1,2],[2,3],null,4]`, `[1,2,2,3,4]`},
		{"union", `[[1,2,{"a":1}],[2,3,{"a":1.0}]]`, `[1,2,{"a":1},3]`},
		{"intersect", `[[1,2,3,2],[3,2,5],[2,3,9]]`, `[2,3]`},
		{"intersect", `[[1],[]]`, `[]`},
		{"deepMerge", `[{"a":{"x":1,"y":[1,2]},"b":1},{"a":{"y":[9],"z":2},"b":null},null]`, `{"a":{"x":1,"y":[9,2],"z":2},"b":null}`},
		{"deepMerge", `[[{"id":1,"name":"a"},{"id":2}],[{"email":"x"},{"email":"y"}]]`, `[{"id":1,"name":"a","email":"x"},{"id":2,"email":"y"}]`},
	} {
		srcs, _ := j(t, tc.sources).([]any)
		out, err := merge(context.Background(), tc.strategy, srcs)
		if err != nil {
			t.Fatalf("%s: %v", tc.strategy, err)
		}
		eqJSON(t, out, tc.want)
	}
}

func TestMapFuncs(t *testing.T) {
	for _, tc := range []struct{ fn, in, want string }{
		{"toUpperCase", `"ab"`, `"AB"`}, {"toLowerCase", `"AB"`, `"ab"`}, {"trim", `"  a "`, `"a"`},
		{"length", `"héllo"`, `5`}, {"length", `[1,2]`, `2`}, {"toString", `12`, `"12"`}, {"toNumber", `"12.5"`, `12.5`},
		{"round", `2.5`, `3`}, {"floor", `2.7`, `2`}, {"ceil", `2.1`, `3`}, {"abs", `-4`, `4`}, {"not", `0`, `true`},
	} {
		out, err := applyFn(tc.fn, j(t, tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.fn, err)
		}
		eqJSON(t, out, tc.want)
	}
	if _, err := applyFn("toNumber", "abc"); err == nil {
		t.Error("toNumber(abc) accepted")
	}
}
