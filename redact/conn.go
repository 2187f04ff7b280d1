package redact

import "strings"

// connection returns a connection string s (the value of key, a key
// naming one) with its secret parts replaced, and whether it changed:
//
//   - a URL ("postgres://u:P@h/db", "jdbc:sqlserver://h;password=P") has
//     its credentials replaced as an array string's URL has (urls), and,
//     when it holds ';', its "name=value" fields as below;
//   - a list of "name=value" fields, separated by ';' (ADO.NET, ODBC,
//     Azure: "Server=h;Password=P;", "AccountKey=P") or, without ';', by
//     white space (libpq: "host=h password=P"), has the value of every
//     field whose name is a secret key (not DSN, ODBC's data source
//     name) replaced; a value may be braced
//     (ODBC's "PWD={P;x}") or quoted ("password='P 5'");
//   - anything else ("user:P@tcp(h)/db", a bare secret) is replaced whole.
func (w *walker) connection(key, s string) (any, bool) {
	if isURLShape(s) {
		r, n := w.urls(s)
		if strings.IndexByte(r, ';') >= 0 {
			var c int
			r, c, _ = w.fields(r, true)
			n += c
		}
		return r, n > 0
	}
	if r, n, ok := w.fields(s, false); ok {
		return r, n > 0
	}
	return w.scalar(key, s)
}

// isURLShape reports whether s starts with a scheme and "://" (a JDBC
// URL's "jdbc:sqlserver://" too).
func isURLShape(s string) bool {
	i := strings.Index(s, "://")
	if i <= 0 || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for j := 0; j < i; j++ {
		if c := s[j]; !isAlnumASCII(c) && strings.IndexByte("+-.:", c) < 0 {
			return false
		}
	}
	return true
}

// fields redacts the secret fields of s, a list of "name=value" fields
// (see connection), and returns how many it replaced; ok says s is such a
// list. lenient skips what is no field (a URL's authority before its
// first ';') instead of failing.
func (w *walker) fields(s string, lenient bool) (r string, n int, ok bool) {
	semi := strings.IndexByte(s, ';') >= 0
	isSep := func(c byte) bool { return c == ';' || !semi && isSpaceASCII(c) }
	var e paramEdit
	found := false
	for i := 0; i < len(s); {
		for i < len(s) && (isSep(s[i]) || isSpaceASCII(s[i])) {
			i++
		}
		if i == len(s) {
			break
		}
		eq := i
		for eq < len(s) && s[eq] != '=' && !isSep(s[eq]) {
			eq++
		}
		name := strings.TrimSpace(s[i:eq])
		if eq == len(s) || s[eq] != '=' || !isFieldName(name) {
			if !lenient {
				return s, 0, false
			}
			for i = eq; i < len(s) && !isSep(s[i]); i++ {
			}
			continue
		}
		found = true
		v := eq + 1
		end := fieldEnd(s, v, isSep)
		if c := w.t.class(name); c&classSecret != 0 && c&classConn == 0 { // ODBC's DSN=name is a name
			if rv, ok := w.scalar(name, s[v:end]); ok {
				e.b.WriteString(s[e.last:v])
				e.b.WriteString(rv.(string))
				e.last = end
				e.n++
			}
		}
		i = end
	}
	r, n = e.result(s)
	return r, n, found
}

// fieldEnd returns where the value of a field starting at v ends: after
// its closing brace ("{P;x}", "}}" escaping one) or quote (a backslash or
// a doubled quote escaping one), or at the next separator.
func fieldEnd(s string, v int, isSep func(byte) bool) int {
	if v < len(s) && (s[v] == '{' || s[v] == '\'' || s[v] == '"') {
		closer := s[v]
		if closer == '{' {
			closer = '}'
		}
		for j := v + 1; j < len(s); j++ {
			switch {
			case s[j] == '\\' && closer != '}':
				j++
			case s[j] == closer && j+1 < len(s) && s[j+1] == closer:
				j++
			case s[j] == closer:
				return j + 1
			}
		}
		return len(s)
	}
	end := v
	for end < len(s) && !isSep(s[end]) {
		end++
	}
	return end
}

// isFieldName reports whether name can name a connection string's field:
// letters, digits, spaces, '_', '-' and '.' ("User ID", "Data Source").
func isFieldName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnumASCII(c) && strings.IndexByte(" _-.", c) < 0 {
			return false
		}
	}
	return true
}

func isSpaceASCII(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }
