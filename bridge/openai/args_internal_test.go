package openai

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzArgsFragment: a tool call's argument fragment decodes as
// encoding/json decodes the same JSON string, but for bytes that are not
// UTF-8, kept as they are (encoding/json makes each U+FFFD), so that a
// character split between two fragments is whole once they are joined.
func FuzzArgsFragment(f *testing.F) {
	for _, s := range []string{`"{\"x\":\"` + "\xe2\x82" + `"`, `"\u00e9\ud83d\ude00\ud83d\u0041\/\b\f\n\r\t"`, `"\ud83d` + "\xac" + `"`, `null`, `""`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, q []byte) {
		var want string
		if json.Unmarshal(q, &want) != nil {
			return
		}
		var got argsFragment
		if err := json.Unmarshal(q, &got); err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		if perByteRuneError(string(got)) != want {
			t.Fatalf("%q: %q, encoding/json %q", q, got, want)
		}
	})
}

// perByteRuneError is s with each byte that is not UTF-8 made U+FFFD, as
// encoding/json decodes a string.
func perByteRuneError(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		out = utf8.AppendRune(out, r)
		i += n
	}
	return string(out)
}
