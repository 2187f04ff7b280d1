package jsonstr

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Value decodes the JSON value at data[i:] as a json.Decoder with
// UseNumber decodes it into an any: objects as map[string]any (a repeated
// key: the last wins), arrays as []any, strings unescaped as encoding/json
// does, numbers as json.Number, or as float64 with floats (what
// json.Unmarshal gives). It returns the index after the value; ok is false
// when there is no well-formed value there. data must be valid JSON
// ([Valid]) for the answer to be encoding/json's: the scan does not check
// what it skips.
func Value(data []byte, i int, floats bool) (v any, end int, ok bool) {
	i = SkipSpace(data, i)
	if i >= len(data) {
		return nil, i, false
	}
	switch data[i] {
	case '{':
		return Object(data, i, floats)
	case '[':
		out := []any{}
		i++
		for {
			next, done, ok := nextItem(data, i, ']')
			if !ok || done {
				return out, next, ok
			}
			x, end, ok := Value(data, next, floats)
			if !ok {
				return nil, end, false
			}
			out = append(out, x)
			i = end
		}
	case '"':
		end := SkipString(data, i)
		if end > len(data) {
			return nil, end, false
		}
		s, ok := String(data[i:end])
		return s, end, ok
	case 't':
		return true, i + 4, true
	case 'f':
		return false, i + 5, true
	case 'n':
		return nil, i + 4, true
	}
	end = SkipValue(data, i)
	if end <= i {
		return nil, end, false
	}
	if floats {
		f, err := strconv.ParseFloat(string(data[i:end]), 64)
		return f, end, err == nil
	}
	return json.Number(string(data[i:end])), end, true
}

// Object decodes the object at data[i] (a '{') as [Value] does.
func Object(data []byte, i int, floats bool) (m map[string]any, end int, ok bool) {
	m = map[string]any{}
	i++
	for {
		next, done, ok := nextItem(data, i, '}')
		if !ok || done {
			return m, next, ok
		}
		i = next
		if data[i] != '"' {
			return nil, i, false
		}
		end := SkipString(data, i)
		if end > len(data) {
			return nil, end, false
		}
		k, ok := String(data[i:end])
		if !ok {
			return nil, end, false
		}
		i = SkipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return nil, i, false
		}
		x, next, ok := Value(data, i+1, floats)
		if !ok {
			return nil, next, false
		}
		m[k] = x // a repeated key: the last wins, as with encoding/json
		i = next
	}
}

// String decodes a JSON string (quotes included) as encoding/json does: a
// string without escapes, control characters or invalid UTF-8 is copied
// as it stands, any other goes to json.Unmarshal.
func String(q []byte) (string, bool) {
	if in, ok := Plain(q); ok {
		return string(in), true
	}
	var s string
	return s, json.Unmarshal(q, &s) == nil
}

// Plain returns the contents of the quoted JSON string q, without its
// quotes, when they need no decoding (no escape, no control character,
// valid UTF-8): what json.Unmarshal would give; false otherwise.
func Plain(q []byte) ([]byte, bool) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return nil, false
	}
	in := q[1 : len(q)-1]
	for _, c := range in {
		if c < 0x20 || c == '"' || c == '\\' {
			return nil, false
		}
	}
	if !utf8.Valid(in) {
		return nil, false
	}
	return in, true
}

// nextItem skips white space and commas to the next member or element of
// the object or array being read; done reports its closing byte (next is
// then the index after it).
func nextItem(data []byte, i int, closing byte) (next int, done, ok bool) {
	for {
		i = SkipSpace(data, i)
		if i >= len(data) {
			return i, false, false
		}
		switch data[i] {
		case closing:
			return i + 1, true, true
		case ',':
			i++
			continue
		}
		return i, false, true
	}
}
