package jsonstr

import "bytes"

// maxDepth is encoding/json's nesting limit: Valid refuses deeper input as
// json.Valid does.
const maxDepth = 10000

// Valid reports whether data is one valid JSON value (surrounded by white
// space at most), exactly as encoding/json.Valid does (FuzzValid checks it
// against it), in a few times less time: a frame is checked once per read
// on every stream, and json.Valid's byte-by-byte state machine was the
// largest single cost of egress. Like json.Valid it does not check UTF-8,
// refuses nesting deeper than 10,000, and is iterative: its memory is one
// byte per open container, whatever the input.
func Valid(data []byte) bool {
	i, ok := value(data, SkipSpace(data, 0), maxDepth)
	return ok && SkipSpace(data, i) == len(data)
}

// ValidAnyDepth is [Valid] without its nesting limit: RFC 8259 sets
// none, so a caller that refuses deep input by its own bound tells the
// two apart (too deep, or not JSON). Its memory is one byte per open
// container, as Valid's.
func ValidAnyDepth(data []byte) bool {
	i, ok := value(data, SkipSpace(data, 0), len(data)+1)
	return ok && SkipSpace(data, i) == len(data)
}

// ValidMembers is [Valid] and [Members] in one pass over data: it reports
// whether data is a valid JSON object (surrounded by white space at most),
// calling fn with each member's key (without its quotes) and value as it
// goes. It returns false when data is not valid JSON (as json.Valid
// judges it), when it is valid but not an object, when a key is written
// with escapes (encoding/json would unescape it: leave such input to it),
// or as soon as fn returns false; fn may have been called for the members
// before the one that made it false.
func ValidMembers(data []byte, fn func(key, val []byte) bool) bool {
	i := SkipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	if i = SkipSpace(data, i+1); i < len(data) && data[i] == '}' {
		return SkipSpace(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return false
		}
		kend, ok := str(data, i)
		if !ok {
			return false
		}
		key := data[i+1 : kend-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return false
		}
		if i = SkipSpace(data, kend); i >= len(data) || data[i] != ':' {
			return false
		}
		i = SkipSpace(data, i+1)
		vend, ok := value(data, i, maxDepth-1) // the object is one level
		if !ok || !fn(key, data[i:vend]) {
			return false
		}
		if i = SkipSpace(data, vend); i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = SkipSpace(data, i+1)
		case '}':
			return SkipSpace(data, i+1) == len(data)
		default:
			return false
		}
	}
}

// value checks the JSON value starting at data[i], nested at most depth
// containers deep, and returns the index after it.
func value(data []byte, i, depth int) (int, bool) {
	var buf [64]byte
	stack := buf[:0] // the open containers, '{' or '['
	for {
		// A value starts at i.
		if i >= len(data) {
			return i, false
		}
		var ok bool
		switch c := data[i]; {
		case c == '{' || c == '[':
			if len(stack) >= depth {
				return i, false
			}
			end := byte('}')
			if c == '[' {
				end = ']'
			}
			if i = SkipSpace(data, i+1); i < len(data) && data[i] == end {
				i, ok = i+1, true
				break
			}
			stack = append(stack, c)
			if c == '{' {
				if i, ok = member(data, i); !ok {
					return i, false
				}
			}
			continue
		case c == '"':
			i, ok = str(data, i)
		case c == 't':
			i, ok = literal(data, i, "true")
		case c == 'f':
			i, ok = literal(data, i, "false")
		case c == 'n':
			i, ok = literal(data, i, "null")
		case c == '-' || (c >= '0' && c <= '9'):
			i, ok = number(data, i)
		}
		if !ok {
			return i, false
		}
		// After a value: close containers, or go on to the next value.
		for {
			if len(stack) == 0 {
				return i, true
			}
			if i = SkipSpace(data, i); i >= len(data) {
				return i, false
			}
			top := stack[len(stack)-1]
			if c := data[i]; (top == '{' && c == '}') || (top == '[' && c == ']') {
				stack = stack[:len(stack)-1]
				i++
				continue
			} else if c != ',' {
				return i, false
			}
			i = SkipSpace(data, i+1)
			if top == '{' {
				if i, ok = member(data, i); !ok {
					return i, false
				}
			}
			break
		}
	}
}

// member checks a member's key and colon at data[i:] and returns the
// index of its value.
func member(data []byte, i int) (int, bool) {
	if i >= len(data) || data[i] != '"' {
		return i, false
	}
	i, ok := str(data, i)
	if !ok {
		return i, false
	}
	if i = SkipSpace(data, i); i >= len(data) || data[i] != ':' {
		return i, false
	}
	return SkipSpace(data, i+1), true
}

func literal(data []byte, i int, lit string) (int, bool) {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// str checks the string at data[i] (a quote): no control character, only
// the escapes JSON has.
func str(data []byte, i int) (int, bool) {
	for i++; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			i++
			if i >= len(data) {
				return i, false
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(data)-i < 5 || !isHex(data[i+1]) || !isHex(data[i+2]) || !isHex(data[i+3]) || !isHex(data[i+4]) {
					return i, false
				}
				i += 4
			default:
				return i, false
			}
		}
	}
	return i, false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// number checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at data[i].
func number(data []byte, i int) (int, bool) {
	if data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return i, false
	case data[i] == '0':
		i++
	case data[i] >= '1' && data[i] <= '9':
		i = digits(data, i+1)
	default:
		return i, false
	}
	if i < len(data) && data[i] == '.' {
		j := digits(data, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := digits(data, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func digits(data []byte, i int) int {
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}
