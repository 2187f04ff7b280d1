package workflow

import (
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// pathGrammar is the path syntax of doc.go read apart from parseSegments:
// /workflow, then properties (after "/" or ".", the first after "/", one
// or more bytes that are no separator, brace, space or control character)
// and array indices of decimal digits only, never first.
var pathGrammar = regexp.MustCompile(`^/workflow(?:/[^/.\[\]{}\x00-\x20\x7f]+(?:[/.][^/.\[\]{}\x00-\x20\x7f]+|\[[0-9]+\])*)?$`)

// pathIndices finds the indices of a path the grammar takes.
var pathIndices = regexp.MustCompile(`\[([0-9]+)\]`)

// FuzzParsePath: any data-model path an operation names (inputPath,
// outputPath, a condition's path, a reference). ParsePath never panics,
// takes a path exactly when pathGrammar does and its indices are at most
// maxIndex, keeps the text as written, and its canonical spelling parses
// to the same segments and is its own canonical spelling; a refusal is
// escaped. A field (FilterData's, sort's) starting with a property reads
// as the path /workflow/<field> does.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"/workflow", "/workflow/users[0].name", "/workflow/a/b", "/workflow/a.b[1][2]/c",
		"/workflow/_loop/item.id", "/workflow/a[-0]", "/workflow/a[+1]", "/workflow/a[007]", "/workflow/a[1048577]",
		"/workflow/é.ü", "/workflow/a[", "/workflow/[0]", "/workflow/a..b", "/workflowx", "/workflow/a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePath(s)
		want := pathGrammar.MatchString(s)
		for _, m := range pathIndices.FindAllStringSubmatch(s, -1) {
			if n, err := strconv.Atoi(m[1]); err != nil || n > maxIndex {
				want = false
			}
		}
		if (err == nil) != want {
			t.Fatalf("ParsePath(%q): %v; the grammar takes it: %v", s, err, want)
		}
		if err != nil {
			if m := err.Error(); !utf8.ValidString(m) || strings.ContainsFunc(m, unicode.IsControl) {
				t.Fatalf("refusal not escaped: %q", m)
			}
			return
		}
		if p.String() != s {
			t.Fatalf("ParsePath(%q).String() = %q", s, p.String())
		}
		c := p.canonical()
		q, err := ParsePath(c)
		if err != nil || !reflect.DeepEqual(q.segs, p.segs) || q.canonical() != c {
			t.Fatalf("%q canonical %q read as %+v (%v), want %+v", s, c, q.segs, err, p.segs)
		}
		if field := strings.TrimPrefix(s, Root+"/"); field != s {
			segs, err := parseField(field)
			if err != nil || !reflect.DeepEqual(segs, p.segs) {
				t.Fatalf("field %q read as %+v (%v), the path %q as %+v", field, segs, err, s, p.segs)
			}
		}
	})
}
