package jsonstr

// Deeper reports whether data nests arrays and objects more than max
// levels deep, without decoding it and stopping at the first container
// past max. It does not validate data: quotes and backslash escapes are
// followed so that brackets inside strings do not count. The envelope and
// frame readers of e2a and jsonrpc's Decode bound their input with it.
func Deeper(data []byte, max int) bool {
	depth := 0
	inStr, esc := false, false
	for _, c := range data {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
			if depth > max {
				return true
			}
		case '}', ']':
			depth--
		}
	}
	return false
}
