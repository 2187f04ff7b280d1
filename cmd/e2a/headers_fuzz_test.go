package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzUpstreamHeaders: any E2A_UPSTREAM_HEADERS value. headers never
// panics. Read apart: its entries are the non-blank texts between ";",
// each "Name: value" (the first ":" ends the name). A value with an entry
// that is no such pair is refused naming that entry's position among the
// entries and no text of it (a value may be a secret), in one escaped
// line; one naming a header twice (in any case, as HTTP's names are read)
// is refused naming both positions; the first of the two faults in the
// text is the one named. Otherwise every entry is one header, its name
// and value trimmed.
func FuzzUpstreamHeaders(f *testing.F) {
	for _, s := range []string{"Authorization: Bearer x", "X-Api-Key: k; X-Org: o", " ; ;", "A: 1; A: 2; bad", "a: 1; A: 2",
		"no colon", ": v", "X: a:b:c", "X:\n1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := UpstreamConfig{Headers: s}.headers()
		var entries []string
		for _, kv := range strings.Split(s, ";") {
			if strings.TrimSpace(kv) != "" {
				entries = append(entries, kv)
			}
		}
		bad, twice, first := 0, "", map[string]int{}
		for i, kv := range entries {
			name, _, ok := strings.Cut(kv, ":")
			name = strings.TrimSpace(name)
			if !ok || name == "" {
				bad = i + 1
				break
			}
			if j, seen := first[http.CanonicalHeaderKey(name)]; seen {
				twice = strconv.Itoa(j) + " and " + strconv.Itoa(i+1)
				break
			}
			first[http.CanonicalHeaderKey(name)] = i + 1
		}
		if err != nil {
			m := err.Error()
			if !utf8.ValidString(m) || strings.ContainsFunc(m, unicode.IsControl) || len(m) > 300 {
				t.Fatalf("%q refused with %q", s, m)
			}
			switch {
			case bad != 0:
				if want := "(entry " + strconv.Itoa(bad) + ")"; !strings.HasSuffix(m, want) {
					t.Fatalf("%q: entry %d is no pair, refused with %q", s, bad, m)
				}
			case twice != "":
				if !strings.Contains(m, "entries "+twice) {
					t.Fatalf("%q: a header named in entries %s, refused with %q", s, twice, m)
				}
			default:
				t.Fatalf("%q refused: %v", s, err)
			}
			return
		}
		if bad != 0 || twice != "" {
			t.Fatalf("%q taken as %q (entry %d no pair, a header in entries %q)", s, got, bad, twice)
		}
		if len(got) != len(entries) {
			t.Fatalf("%q: %d entries read as %d headers", s, len(entries), len(got))
		}
		for _, kv := range entries {
			name, value, _ := strings.Cut(kv, ":")
			if v, ok := got[strings.TrimSpace(name)]; !ok || v != strings.TrimSpace(value) {
				t.Fatalf("%q: %q read as %q (%v)", s, kv, v, ok)
			}
		}
	})
}
