package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
)

// evalOperator applies a condition operator to a value and an operand.
// Comparisons never fail: an impossible comparison (ordering a string
// against an object, startsWith on a number) is false.
//
//   - == and != compare JSON values deeply; numbers by value (1 == 1.0).
//   - > < >= <= order numbers numerically (a numeric string is read as a
//     number against a number), strings lexically.
//   - in: the value equals an element of the operand array.
//   - contains: a string contains the operand text; an array contains an
//     element equal to the operand; an object has the operand as a key.
//   - startsWith / endsWith: string prefix / suffix.
func evalOperator(v any, op string, operand any) bool {
	switch op {
	case "==":
		return deepEqual(v, operand)
	case "!=":
		return !deepEqual(v, operand)
	case ">", "<", ">=", "<=":
		c, ok := order(v, operand)
		if !ok {
			return false
		}
		switch op {
		case ">":
			return c > 0
		case "<":
			return c < 0
		case ">=":
			return c >= 0
		}
		return c <= 0
	case "in":
		a, ok := operand.([]any)
		if !ok {
			return false
		}
		for _, x := range a {
			if deepEqual(v, x) {
				return true
			}
		}
		return false
	case "contains":
		switch t := v.(type) {
		case string:
			s, ok := operand.(string)
			return ok && strings.Contains(t, s)
		case []any:
			for _, x := range t {
				if deepEqual(x, operand) {
					return true
				}
			}
			return false
		case map[string]any:
			s, ok := operand.(string)
			if !ok {
				return false
			}
			_, has := t[s]
			return has
		}
		return false
	case "startsWith", "endsWith":
		s, ok1 := v.(string)
		p, ok2 := operand.(string)
		if !ok1 || !ok2 {
			return false
		}
		if op == "startsWith" {
			return strings.HasPrefix(s, p)
		}
		return strings.HasSuffix(s, p)
	}
	return false
}

// filterArray keeps the elements of input matching every condition (with
// operands already resolved). A missing field reads as null. It stops when
// ctx ends (the execution's deadline): an "in" or "contains" operand that
// is an array of the data model makes it compare every element with every
// element of the operand, hours of CPU for the largest data models.
func filterArray(ctx context.Context, input any, conds []Condition) (any, error) {
	arr, ok := input.([]any)
	if !ok {
		return nil, dataError("FilterData needs an array, got %s", typeName(input))
	}
	out := make([]any, 0, len(arr))
	for _, el := range arr {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		keep := true
		for _, c := range conds {
			v, _ := lookup(el, c.field)
			if !evalOperator(v, c.Operator, c.Value) {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, el)
		}
	}
	return out, nil
}

func fieldOf(v any, f string) any {
	segs, err := parseField(f)
	if err != nil {
		return nil
	}
	r, _ := lookup(v, segs)
	return r
}

func cfgString(cfg map[string]any, k string) string {
	s, _ := cfg[k].(string)
	return s
}

// transform applies a TransformData transform. See doc.go for the config
// of each transform. limit is what is left of Limits.MaxDataBytes: a map
// or an aggregate, whose output can be far larger than its input (a "set"
// constant in every element, groups times aggregations), stops building
// once its output passes it. A map, an aggregate or a select, whose work
// is the elements times the configuration's constants, aggregations or
// fields, stops when ctx ends (the execution's deadline).
func transform(ctx context.Context, input any, kind string, cfg map[string]any, limit int) (any, error) {
	switch kind {
	case "map":
		return transformMap(ctx, input, cfg, limit)
	case "sort":
		return transformSort(input, cfg)
	case "group":
		arr, ok := input.([]any)
		if !ok {
			return nil, dataError("group needs an array, got %s", typeName(input))
		}
		field := cfgString(cfg, "field")
		out := map[string]any{}
		for _, el := range arr {
			k := groupKey(fieldOf(el, field))
			g, _ := out[k].([]any)
			out[k] = append(g, el)
		}
		return out, nil
	case "aggregate":
		return transformAggregate(ctx, input, cfg, limit)
	case "select":
		return transformSelect(ctx, input, cfg)
	}
	return nil, newError(ValidationError, "unknown transform %q", kind)
}

func transformMap(ctx context.Context, input any, cfg map[string]any, limit int) (any, error) {
	arr, ok := input.([]any)
	if !ok {
		return nil, dataError("map needs an array, got %s", typeName(input))
	}
	field, hasField := cfg["field"].(string)
	fn := cfgString(cfg, "fn")
	target := cfgString(cfg, "target")
	fields, _ := cfg["fields"].(map[string]any)
	set, _ := cfg["set"].(map[string]any)
	out := make([]any, len(arr))
	size := 1 // the brackets, and a comma after each element but the last
	for i, el := range arr {
		var res any
		switch {
		case fields != nil:
			obj := map[string]any{}
			for k, src := range fields {
				s, _ := src.(string)
				obj[k] = fieldOf(el, s)
			}
			res = obj
		case hasField && fn == "" && set == nil && target == "":
			res = fieldOf(el, field) // pluck
		default:
			res = el
		}
		if fn != "" {
			src := el
			if hasField {
				src = fieldOf(el, field)
			}
			v, err := applyFn(fn, src)
			if err != nil {
				return nil, dataError("map element %d: %v", i, err)
			}
			switch {
			case target != "":
				segs, _ := parseField(target)
				r, err := setIn(res, segs, v)
				if err != nil {
					return nil, dataError("map element %d: %v", i, err)
				}
				res = r
			case hasField && fields == nil && set == nil:
				res = v
			case hasField:
				segs, _ := parseField(field)
				r, err := setIn(res, segs, v)
				if err != nil {
					return nil, dataError("map element %d: %v", i, err)
				}
				res = r
			default:
				res = v
			}
		}
		if set != nil {
			if _, isObj := res.(map[string]any); !isObj && res != nil {
				return nil, dataError("map element %d: set needs objects, got %s", i, typeName(res))
			}
			for k, v := range set {
				// each constant copies the element built so far
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				segs, err := parseField(k)
				if err != nil {
					return nil, dataError("map set %q: %v", k, err)
				}
				r, err := setIn(res, segs, v)
				if err != nil {
					return nil, dataError("map element %d: %v", i, err)
				}
				res = r
			}
		}
		out[i] = res
		if size += sizeAtMost(res, limit-size) + 1; size > limit+1 {
			return nil, dataError("the map's output passes the %d bytes left of the execution's outputs (MaxDataBytes) at element %d", limit, i)
		}
	}
	return out, nil
}

func applyFn(fn string, v any) (any, error) {
	switch fn {
	case "toUpperCase", "toLowerCase", "trim":
		s, ok := v.(string)
		if !ok {
			if v == nil {
				return nil, nil
			}
			s = stringify(v)
		}
		switch fn {
		case "toUpperCase":
			return strings.ToUpper(s), nil
		case "toLowerCase":
			return strings.ToLower(s), nil
		}
		return strings.TrimSpace(s), nil
	case "length":
		switch t := v.(type) {
		case string:
			return numberValue(float64(len([]rune(t)))), nil
		case []any:
			return numberValue(float64(len(t))), nil
		case map[string]any:
			return numberValue(float64(len(t))), nil
		case nil:
			return numberValue(0), nil
		}
		return nil, fmt.Errorf("length of a %s", typeName(v))
	case "toString":
		if v == nil {
			return "", nil
		}
		return stringify(v), nil
	case "toNumber":
		if v == nil {
			return nil, nil
		}
		if b, ok := v.(bool); ok {
			if b {
				return numberValue(1), nil
			}
			return numberValue(0), nil
		}
		f, ok := coerceNumber(v)
		if !ok {
			return nil, fmt.Errorf("%s is not a number", stringify(v))
		}
		return numberValue(f), nil
	case "round", "floor", "ceil", "abs":
		if v == nil {
			return nil, nil
		}
		f, ok := coerceNumber(v)
		if !ok {
			return nil, fmt.Errorf("%s is not a number", stringify(v))
		}
		switch fn {
		case "round":
			f = math.Round(f)
		case "floor":
			f = math.Floor(f)
		case "ceil":
			f = math.Ceil(f)
		default:
			f = math.Abs(f)
		}
		return numberValue(f), nil
	case "not":
		return !truthy(v), nil
	}
	return nil, fmt.Errorf("unknown function %q", fn)
}

func truthy(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case bool:
		return t
	case string:
		return t != ""
	case []any:
		return len(t) > 0
	case map[string]any:
		return true
	}
	f, ok := toNumber(v)
	return !ok || f != 0
}

// sortRank orders values of different types: numbers, strings, booleans,
// then everything else; null and missing values last.
func sortRank(v any) int {
	switch v.(type) {
	case nil:
		return 5
	case string:
		return 1
	case bool:
		return 2
	case map[string]any, []any:
		return 3
	}
	if _, ok := toNumber(v); ok {
		return 0
	}
	return 4
}

func transformSort(input any, cfg map[string]any) (any, error) {
	arr, ok := input.([]any)
	if !ok {
		return nil, dataError("sort needs an array, got %s", typeName(input))
	}
	field := cfgString(cfg, "field")
	desc := cfgString(cfg, "order") == "desc"
	out := append([]any(nil), arr...)
	keys := make([]any, len(out))
	for i, el := range out {
		keys[i] = fieldOf(el, field)
	}
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ka, kb := keys[idx[a]], keys[idx[b]]
		ra, rb := sortRank(ka), sortRank(kb)
		if ra != rb {
			return ra < rb // nulls last in both orders
		}
		c, ok := order(ka, kb)
		if !ok {
			c = strings.Compare(canonical(ka), canonical(kb))
		}
		if desc {
			return c > 0
		}
		return c < 0
	})
	res := make([]any, len(out))
	for i, j := range idx {
		res[i] = out[j]
	}
	return res, nil
}

func aggregate(arr []any, fn, field string) any {
	if fn == "count" {
		if field == "" {
			return numberValue(float64(len(arr)))
		}
		n := 0
		for _, el := range arr {
			if fieldOf(el, field) != nil {
				n++
			}
		}
		return numberValue(float64(n))
	}
	var sum float64
	var best any
	n := 0
	for _, el := range arr {
		v := fieldOf(el, field)
		switch fn {
		case "min", "max":
			if v == nil {
				continue
			}
			if best == nil {
				best = v
				continue
			}
			c, ok := order(v, best)
			if ok && (fn == "min" && c < 0 || fn == "max" && c > 0) {
				best = v
			}
		default:
			f, ok := coerceNumber(v)
			if !ok {
				continue
			}
			sum += f
			n++
		}
	}
	switch fn {
	case "sum":
		return numberValue(sum)
	case "avg":
		if n == 0 {
			return nil
		}
		return numberValue(sum / float64(n))
	}
	return best
}

func transformAggregate(ctx context.Context, input any, cfg map[string]any, limit int) (any, error) {
	arr, ok := input.([]any)
	if !ok {
		return nil, dataError("aggregate needs an array, got %s", typeName(input))
	}
	// size counts the output as it is built (members' names and values,
	// never more than their encoding): groups times aggregations can be
	// thousands of times the input.
	size := 2
	grow := func(name string, v any) error {
		if size += len(name) + 3 + sizeAtMost(v, limit-size); size > limit {
			return dataError("the aggregate's output passes the %d bytes left of the execution's outputs (MaxDataBytes)", limit)
		}
		return nil
	}
	one := func(items []any) (any, error) {
		aggs, ok := cfg["aggregations"].([]any)
		if !ok {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return aggregate(items, cfgString(cfg, "operation"), cfgString(cfg, "field")), nil
		}
		out := map[string]any{}
		counted := map[string]int{} // a name given again replaces its value
		for _, a := range aggs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			m, _ := a.(map[string]any)
			fn, field := cfgString(m, "operation"), cfgString(m, "field")
			as := cfgString(m, "as")
			if as == "" {
				as = fn
				if field != "" {
					as = fn + "_" + field
				}
			}
			v := aggregate(items, fn, field)
			size -= counted[as]
			before := size
			if err := grow(as, v); err != nil {
				return nil, err
			}
			counted[as] = size - before
			out[as] = v
		}
		return out, nil
	}
	_, named := cfg["aggregations"].([]any) // one counts their members
	gb := cfgString(cfg, "groupBy")
	if gb == "" {
		return one(arr)
	}
	groups := map[string][]any{}
	for _, el := range arr {
		k := groupKey(fieldOf(el, gb))
		groups[k] = append(groups[k], el)
	}
	out := make(map[string]any, len(groups))
	for k, items := range groups {
		v, err := one(items)
		if err != nil {
			return nil, err
		}
		counted := v
		if named {
			counted = map[string]any{}
		}
		if err := grow(k, counted); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// selectFields keeps fields of v; it stops when ctx ends, as each field
// copies the object selected so far.
func selectFields(ctx context.Context, v any, fields []string) (any, error) {
	if v == nil {
		return nil, nil
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, dataError("select needs objects, got %s", typeName(v))
	}
	var out any = map[string]any{}
	for _, f := range fields {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		segs, err := parseField(f)
		if err != nil {
			return nil, dataError("%v", err)
		}
		x, ok := lookup(v, segs)
		if !ok {
			continue
		}
		out, err = setIn(out, segs, x)
		if err != nil {
			return nil, dataError("%v", err)
		}
	}
	return out, nil
}

func transformSelect(ctx context.Context, input any, cfg map[string]any) (any, error) {
	var fields []string
	raw, _ := cfg["fields"].([]any)
	for _, f := range raw {
		if s, ok := f.(string); ok {
			fields = append(fields, s)
		}
	}
	arr, ok := input.([]any)
	if !ok {
		return selectFields(ctx, input, fields)
	}
	return mapList(arr, func(el any) (any, error) { return selectFields(ctx, el, fields) })
}

func asList(v any) []any {
	if a, ok := v.([]any); ok {
		return a
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

// merge combines sources:
//   - concat: the arrays one after another (a non-array source counts as a
//     one-element array, null as empty);
//   - union: concat without duplicates (deep equality, first occurrence kept);
//   - intersect: the elements of the first source present in every other
//     source, without duplicates;
//   - deepMerge: objects merged key by key recursively, arrays element by
//     element, a later scalar replacing an earlier value; null sources are
//     skipped.
//
// It stops when ctx ends (the execution's deadline): each deepMerge step
// copies what was merged so far, and 40,000 small sources took 85 s.
func merge(ctx context.Context, strategy string, sources []any) (any, error) {
	switch strategy {
	case "concat":
		out := []any{}
		for _, s := range sources {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			out = append(out, asList(s)...)
		}
		return out, nil
	case "union":
		out := []any{}
		seen := map[string]bool{}
		for _, s := range sources {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			for _, x := range asList(s) {
				k := canonical(x)
				if !seen[k] {
					seen[k] = true
					out = append(out, x)
				}
			}
		}
		return out, nil
	case "intersect":
		out := []any{}
		if len(sources) == 0 {
			return out, nil
		}
		sets := make([]map[string]bool, len(sources))
		for i, s := range sources {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			sets[i] = map[string]bool{}
			for _, x := range asList(s) {
				sets[i][canonical(x)] = true
			}
		}
		seen := map[string]bool{}
		for _, x := range asList(sources[0]) {
			k := canonical(x)
			if seen[k] {
				continue
			}
			all := true
			for _, st := range sets[1:] {
				if !st[k] {
					all = false
					break
				}
			}
			if all {
				seen[k] = true
				out = append(out, x)
			}
		}
		return out, nil
	case "deepMerge":
		var out any
		for _, s := range sources {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if s == nil {
				continue
			}
			out = deepMerge(out, s)
		}
		return out, nil
	}
	return nil, newError(ValidationError, "unknown merge strategy %q", strategy)
}

func deepMerge(a, b any) any {
	switch tb := b.(type) {
	case map[string]any:
		ta, ok := a.(map[string]any)
		if !ok {
			ta = nil
		}
		out := make(map[string]any, len(ta)+len(tb))
		for k, v := range ta {
			out[k] = v
		}
		for k, v := range tb {
			if old, ok := out[k]; ok {
				out[k] = deepMerge(old, v)
			} else {
				out[k] = v
			}
		}
		return out
	case []any:
		ta, ok := a.([]any)
		if !ok {
			return tb
		}
		n := max(len(ta), len(tb))
		out := make([]any, n)
		for i := 0; i < n; i++ {
			switch {
			case i < len(ta) && i < len(tb):
				out[i] = deepMerge(ta[i], tb[i])
			case i < len(ta):
				out[i] = ta[i]
			default:
				out[i] = tb[i]
			}
		}
		return out
	}
	return b
}

// jsonSizeAtMost returns the encoded size of v, as jsonSize does, without
// encoding its arrays and objects whole: it adds up their members and stops
// as soon as the size passes limit (over true, n then more than limit and less
// than the full size). An operation's output (a map over an array doubled
// by MergeData, say) can be thousands of times MaxDataBytes encoded; the
// check must not build that encoding first.
func jsonSizeAtMost(v any, limit int) (n int, over bool) {
	n = sizeAtMost(v, limit)
	return n, n > limit
}

// sizeAtMost adds v's encoded size up, stopping once it passes limit.
func sizeAtMost(v any, limit int) int {
	switch v := v.(type) {
	case []any:
		n := 2 + max(len(v)-1, 0) // brackets and commas
		for _, e := range v {
			if n > limit {
				break
			}
			n += sizeAtMost(e, limit-n)
		}
		return n
	case map[string]any:
		n := 2 + max(len(v)-1, 0) + len(v) // braces, commas and colons
		for k, e := range v {
			if n > limit {
				break
			}
			n += jsonSize(k)
			n += sizeAtMost(e, limit-n)
		}
		return n
	}
	return jsonSize(v)
}

// jsonSize returns the encoded size of v.
func jsonSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}
