package redact

import "strings"

// minShape is the shortest value shape can change: a scheme, a space and
// minCredential characters.
const minShape = len("Basic ") + minCredential

// minCredential is the shortest credential after a scheme: "Bearer arms"
// or "Basic auth" is no header value.
const minCredential = 8

// mayBeShape is shape's cheap test, made on every string that is no
// secret's: s may be a JWT or start with "bearer " or "basic ".
func mayBeShape(s string) bool {
	return len(s) >= minShape && (s[0] == 'e' && strings.HasPrefix(s, "eyJ") || s[0]|0x20 == 'b')
}

// shape returns the replacement of a string value under a key that is not
// secret (name) when the value is wholly a credential, and whether it is
// one: a JWT (JWS or JWE compact form, its header starting "eyJ", the
// encoding of `{"`) is replaced whole, "Bearer X" or "Basic X" (X a
// token68 of minCredential characters or more) keeps its scheme. Only a
// whole value counts: a text holding one (a message's content) is no
// credential's value and is never rewritten.
func (w *walker) shape(name, s string) (string, bool) {
	if strings.HasPrefix(s, "eyJ") && isJWT(s) {
		r, ok := w.scalar(name, s)
		return r.(string), ok
	}
	sp := strings.IndexByte(s, ' ')
	if sp < 0 || !strings.EqualFold(s[:sp], "bearer") && !strings.EqualFold(s[:sp], "basic") {
		return s, false
	}
	v := sp
	for v < len(s) && s[v] == ' ' {
		v++
	}
	if len(s)-v < minCredential || !isToken68(s[v:]) {
		return s, false
	}
	r, ok := w.scalar(name, s[v:])
	return s[:v] + r.(string), ok
}

// isJWT reports whether s is a JWT in compact form: three (JWS) or five
// (JWE) base64url segments, a header of 10 characters or more, a payload
// (or ciphertext) that is not empty.
func isJWT(s string) bool {
	parts := strings.Split(s, ".")
	body := 1
	switch len(parts) {
	case 3:
	case 5:
		body = 3
	default:
		return false
	}
	if len(parts[0]) < 10 || parts[body] == "" {
		return false
	}
	for _, p := range parts {
		for i := 0; i < len(p); i++ {
			if c := p[i]; !isAlnumASCII(c) && c != '-' && c != '_' {
				return false
			}
		}
	}
	return true
}

// isToken68 reports whether s is an HTTP token68 (RFC 9110): letters,
// digits and "-._~+/", then '=' padding.
func isToken68(s string) bool {
	i := 0
	for i < len(s) && (isAlnumASCII(s[i]) || strings.IndexByte("-._~+/", s[i]) >= 0) {
		i++
	}
	if i == 0 {
		return false
	}
	for i < len(s) && s[i] == '=' {
		i++
	}
	return i == len(s)
}
