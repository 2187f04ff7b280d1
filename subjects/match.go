package subjects

import "strings"

// Matches reports whether subject matches the NATS filter: tokens split
// on ".", "*" matching one token, ">" (last) one or more.
func Matches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		switch {
		case tok == ">":
			return len(s) > i
		case i >= len(s):
			return false
		case tok != "*" && tok != s[i]:
			return false
		}
	}
	return len(f) == len(s)
}
