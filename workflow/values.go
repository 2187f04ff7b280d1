package workflow

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// maxValueDepth is how deep a value the executor reads (a workflow's line,
// an API's answer) or keeps (an operation's output) may nest: the frames
// that carry it add their own levels, and a frame nested deeper than
// e2a.MaxNesting is refused by every reader (the execution's answer and
// status would be unreadable).
const maxValueDepth = e2a.MaxNesting - 16

// decodeJSON decodes data keeping numbers as json.Number, so that large
// integers (ids) survive unchanged. A value nested deeper than
// maxValueDepth is an error.
func decodeJSON(data []byte) (any, error) {
	if err := e2a.CheckDepth(data, maxValueDepth); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("unexpected data after the JSON value")
	}
	return v, nil
}

// toNumber returns v as a float64 when it is a number.
func toNumber(v any) (float64, bool) {
	switch t := v.(type) {
	case json.Number:
		f, err := t.Float64()
		return f, err == nil
	case float64:
		return t, true
	case float32:
		return float64(t), true
	case int:
		return float64(t), true
	case int64:
		return float64(t), true
	case int32:
		return float64(t), true
	case uint64:
		return float64(t), true
	}
	return 0, false
}

// coerceNumber is toNumber that also reads a numeric string.
func coerceNumber(v any) (float64, bool) {
	if f, ok := toNumber(v); ok {
		return f, true
	}
	if s, ok := v.(string); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	return 0, false
}

// numberValue returns f as a json.Number, written without an exponent or a
// fraction when it is a whole number that fits.
func numberValue(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return json.Number(strconv.FormatInt(int64(f), 10))
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
}

// canonicalNumber writes a number in one spelling so that 1, 1.0 and 1e0
// compare equal.
func canonicalNumber(n json.Number) string {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return strconv.FormatInt(i, 10)
	}
	if f, err := n.Float64(); err == nil {
		if f == math.Trunc(f) && math.Abs(f) < 1e15 {
			return strconv.FormatInt(int64(f), 10)
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return string(n)
}

// canonical writes v as JSON with sorted keys and canonical numbers; equal
// values have equal canonical forms.
func canonical(v any) string {
	var b strings.Builder
	writeCanonical(&b, v)
	return b.String()
}

func writeCanonical(b *strings.Builder, v any) {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case string:
		q, _ := json.Marshal(t)
		b.Write(q)
	case json.Number:
		b.WriteString(canonicalNumber(t))
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			q, _ := json.Marshal(k)
			b.Write(q)
			b.WriteByte(':')
			writeCanonical(b, t[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, x)
		}
		b.WriteByte(']')
	default:
		if f, ok := toNumber(v); ok {
			b.WriteString(canonicalNumber(json.Number(strconv.FormatFloat(f, 'g', -1, 64))))
			return
		}
		q, err := json.Marshal(t)
		if err != nil {
			fmt.Fprintf(b, "%q", fmt.Sprint(t))
			return
		}
		b.Write(q)
	}
}

// hashValue returns the hex SHA-256 of v's canonical form.
func hashValue(v any) string {
	h := sha256.Sum256([]byte(canonical(v)))
	return hex.EncodeToString(h[:])
}

// deepEqual compares two JSON values; numbers compare by value.
func deepEqual(a, b any) bool {
	if fa, ok := toNumber(a); ok {
		fb, ok := toNumber(b)
		return ok && fa == fb
	}
	switch ta := a.(type) {
	case nil:
		return b == nil
	case bool:
		tb, ok := b.(bool)
		return ok && ta == tb
	case string:
		tb, ok := b.(string)
		return ok && ta == tb
	case []any:
		tb, ok := b.([]any)
		if !ok || len(ta) != len(tb) {
			return false
		}
		for i := range ta {
			if !deepEqual(ta[i], tb[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		tb, ok := b.(map[string]any)
		if !ok || len(ta) != len(tb) {
			return false
		}
		for k, va := range ta {
			vb, ok := tb[k]
			if !ok || !deepEqual(va, vb) {
				return false
			}
		}
		return true
	}
	return canonical(a) == canonical(b)
}

// order compares a and b for sorting and the ordering operators. Numbers
// compare numerically (a numeric string is read as a number when the other
// side is a number), strings lexically (ISO 8601 timestamps therefore in
// time order), booleans false < true. ok is false when the two cannot be
// ordered.
func order(a, b any) (c int, ok bool) {
	fa, na := toNumber(a)
	fb, nb := toNumber(b)
	if na || nb {
		if !na {
			fa, na = coerceNumber(a)
		}
		if !nb {
			fb, nb = coerceNumber(b)
		}
		if !na || !nb {
			return 0, false
		}
		switch {
		case fa < fb:
			return -1, true
		case fa > fb:
			return 1, true
		}
		return 0, true
	}
	switch ta := a.(type) {
	case string:
		tb, ok := b.(string)
		if !ok {
			return 0, false
		}
		return strings.Compare(ta, tb), true
	case bool:
		tb, ok := b.(bool)
		if !ok {
			return 0, false
		}
		switch {
		case ta == tb:
			return 0, true
		case !ta:
			return -1, true
		}
		return 1, true
	}
	return 0, false
}

// mapList returns a new list of f applied to each element of arr, in
// order; the first error stops it and is returned.
func mapList(arr []any, f func(any) (any, error)) ([]any, error) {
	out := make([]any, len(arr))
	for i, el := range arr {
		v, err := f(el)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// normalize converts Go values from other decoders (float64, int, typed
// maps and slices) into the data model's forms: map[string]any, []any,
// json.Number, string, bool and nil.
func normalize(v any) any {
	switch t := v.(type) {
	case nil, bool, string, json.Number:
		return t
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = normalize(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = normalize(x)
		}
		return out
	}
	if f, ok := toNumber(v); ok {
		return numberValue(f)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	d, err := decodeJSON(b)
	if err != nil {
		return string(b)
	}
	return d
}

// stringify renders a value for interpolation into text: strings as they
// are, everything else as compact JSON.
func stringify(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case json.Number:
		return t.String()
	case nil:
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// groupKey renders a value as an object key for group and aggregate.
func groupKey(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case string:
		return t
	case json.Number:
		return canonicalNumber(t)
	}
	return canonical(v)
}

// depthAtMost reports whether the decoded JSON value v nests no deeper
// than max (an object or array is one level).
func depthAtMost(v any, max int) bool {
	switch v := v.(type) {
	case map[string]any:
		if max <= 0 {
			return false
		}
		for _, e := range v {
			if !depthAtMost(e, max-1) {
				return false
			}
		}
	case []any:
		if max <= 0 {
			return false
		}
		for _, e := range v {
			if !depthAtMost(e, max-1) {
				return false
			}
		}
	}
	return true
}
