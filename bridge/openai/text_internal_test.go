package openai

import (
	"testing"
	"unicode/utf8"
)

// FuzzTextJoin: the text textJoin writes is valid UTF-8, and the same
// whatever the fragments the bytes came in (a character cut between two
// fragments is joined, never U+FFFD for each part).
func FuzzTextJoin(f *testing.F) {
	for _, s := range []string{"€!", "a😀", "\xed\xa0\xbd\xed\xb8\x80", "a\xe2\x82", "\xed\xa0\xbdx", "\xed\xb8\x80", "\xff\xfe", "\xf0\x9f\x98"} {
		f.Add(s, uint8(1))
	}
	f.Fuzz(func(t *testing.T, s string, cut uint8) {
		k := int(cut) % (len(s) + 1)
		var whole, split textJoin
		want := whole.add(s) + whole.end()
		got := split.add(s[:k]) + split.add(s[k:]) + split.end()
		if !utf8.ValidString(want) || got != want {
			t.Fatalf("%q cut at %d: %q, whole %q", s, k, got, want)
		}
	})
}
