package e2a

import "strings"

// W3C Trace Context limits (https://www.w3.org/TR/trace-context-1/) kept by
// [CleanTracestate].
const (
	// MaxTracestateLen is the longest tracestate kept, in bytes: the size
	// the specification asks every vendor to propagate whole.
	MaxTracestateLen = 512
	// MaxTracestateMembers is the most list-members a tracestate may hold.
	MaxTracestateMembers = 32
)

// CleanTrace is the one check of W3C trace context every entry point and
// every sender applies: it returns nil when t is nil or its traceparent is
// not valid ([ValidTraceparent]; its tracestate goes with it), else t with
// its tracestate kept only when [CleanTracestate] keeps it. t itself is not
// modified: a tracestate dropped is dropped in a copy, and a valid trace
// context is returned as it is, byte for byte.
func CleanTrace(t *TraceContext) *TraceContext {
	if t == nil || !ValidTraceparent(t.Traceparent) {
		return nil
	}
	if ts := CleanTracestate(t.Tracestate); ts != t.Tracestate {
		c := *t
		c.Tracestate = ts
		return &c
	}
	return t
}

// ValidTraceparent checks the W3C traceparent format: version-traceid-
// parentid-flags in lower-case hex, version not ff, ids not all zero;
// versions above 00 may carry more fields after a dash.
func ValidTraceparent(s string) bool {
	if len(s) < 55 {
		return false
	}
	for i := 0; i < 55; i++ {
		c := s[i]
		switch i {
		case 2, 35, 52:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	if s[:2] == "ff" || s[3:35] == "00000000000000000000000000000000" || s[36:52] == "0000000000000000" {
		return false
	}
	if len(s) > 55 {
		return s[:2] != "00" && s[55] == '-'
	}
	return true
}

// CleanTracestate joins tracestate header values (several headers are one
// list, empty ones skipped) and returns the result when it is a W3C
// tracestate within the limits, else "" (the whole header is dropped, as the
// specification allows a receiver that cannot parse it): at most
// [MaxTracestateLen] characters of printable ASCII, at most
// [MaxTracestateMembers] list-members, each key=value with the
// specification's key and value grammar and no key twice (OpenTelemetry
// refuses a duplicate); empty and blank list-members are allowed and not
// counted. A tracestate it keeps is returned byte for byte.
func CleanTracestate(vals ...string) string {
	s := ""
	for _, v := range vals {
		if v == "" {
			continue
		}
		if s != "" {
			s += ","
		}
		s += v
	}
	if len(s) > MaxTracestateLen {
		return ""
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return ""
		}
	}
	var keys [MaxTracestateMembers]string
	n := 0
	for rest := s; rest != ""; {
		var m string
		m, rest, _ = strings.Cut(rest, ",")
		m = strings.Trim(m, " ")
		if m == "" {
			continue
		}
		key, val, ok := strings.Cut(m, "=")
		if !ok || n == MaxTracestateMembers || !tracestateKey(key) || !tracestateValue(val) {
			return ""
		}
		for _, k := range keys[:n] {
			if k == key {
				return ""
			}
		}
		keys[n] = key
		n++
	}
	return s
}

// tracestateKey checks a tracestate key:
//
//	key = simple-key / multi-tenant-key
//	simple-key = lcalpha 0*255( lcalpha / DIGIT / "_" / "-"/ "*" / "/" )
//	multi-tenant-key = tenant-id "@" system-id
//	tenant-id = ( lcalpha / DIGIT ) 0*240( lcalpha / DIGIT / "_" / "-"/ "*" / "/" )
//	system-id = lcalpha 0*13( lcalpha / DIGIT / "_" / "-"/ "*" / "/" )
func tracestateKey(k string) bool {
	tenant, system, multi := strings.Cut(k, "@")
	if !multi {
		return keyPart(k, 256, false)
	}
	return keyPart(tenant, 241, true) && keyPart(system, 14, false)
}

// keyPart checks one part of a tracestate key: 1 to max characters of
// lcalpha, DIGIT, "_", "-", "*" and "/", the first a lower-case letter (or
// a digit when digitFirst).
func keyPart(s string, max int, digitFirst bool) bool {
	if s == "" || len(s) > max {
		return false
	}
	if c := s[0]; !(c >= 'a' && c <= 'z' || digitFirst && c >= '0' && c <= '9') {
		return false
	}
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-', c == '*', c == '/':
		default:
			return false
		}
	}
	return true
}

// tracestateValue checks a tracestate value: 1 to 256 printable ASCII
// characters but "," and "=", the last not a space:
//
//	value    = 0*255(chr) nblk-chr
//	nblk-chr = %x21-2B / %x2D-3C / %x3E-7E
//	chr      = %x20 / nblk-chr
func tracestateValue(v string) bool {
	if v == "" || len(v) > 256 || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e || c == ',' || c == '=' {
			return false
		}
	}
	return true
}
