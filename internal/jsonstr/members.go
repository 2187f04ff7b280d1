package jsonstr

import "bytes"

// Members calls fn with the raw bytes of each member's key (without its
// quotes) and value of the JSON object data, in order, without reflection
// or allocation. It returns false when data is not an object as far as the
// scan can tell (it does not validate values: run json.Valid first when
// the input is not known to be valid), when a key is written with escapes
// (encoding/json would unescape it: leave such input to it), or when fn
// returns false. It never panics, whatever data holds.
func Members(data []byte, fn func(key, val []byte) bool) bool {
	i := SkipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i++
	for {
		i = SkipSpace(data, i)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case '}':
			return true
		case ',':
			i++
			continue
		case '"':
		default:
			return false
		}
		end := SkipString(data, i)
		if end > len(data) || end < i+2 {
			return false
		}
		key := data[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return false
		}
		i = SkipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		i = SkipSpace(data, i+1)
		vend := SkipValue(data, i)
		if vend <= i || !fn(key, data[i:vend]) {
			return false
		}
		i = vend
	}
}

// SkipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func SkipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// SkipString returns the index after the string starting at data[i] (a
// quote), or len(data)+1 when it is not terminated.
func SkipString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(data) + 1
}

// SkipValue returns the index after the value starting at data[i]: a
// string, an object or array (to its matching bracket, strings skipped),
// or a literal (to the next delimiter). It returns i when there is no
// value there and len(data) for an unterminated one.
func SkipValue(data []byte, i int) int {
	if i >= len(data) {
		return i
	}
	switch data[i] {
	case '"':
		return min(SkipString(data, i), len(data))
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				i = SkipString(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(data)
	}
	j := i
	for j < len(data) {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r', ':':
			return j
		}
		j++
	}
	return j
}
