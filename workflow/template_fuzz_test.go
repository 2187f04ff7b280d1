package workflow

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// refGrammar finds the references of a template read apart from
// parseTemplate: "{/workflow" up to the next "}".
var refGrammar = regexp.MustCompile(`\{(/workflow[^}]*)\}`)

// FuzzTemplate: any string of a workflow (a body, a header, a condition's
// value) with {/workflow/...} references. parseTemplate never panics; it
// refuses a string only where a reference does not close or holds no
// path; its parts, written back, are the string, with every reference and
// only those (refGrammar); rendering puts a value in place of each, as
// replacing refGrammar's matches does; and a string that is one reference
// resolves to the referenced value itself, of its type.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"{/workflow/a}", "x{/workflow/a}y{/workflow/b[0].c}z", "{not a ref}", "{/workflow/a",
		"{/workflowx}", "{{/workflow/a}}", "{/workflow/a{/workflow/b}}", "}{/workflow}{", ""} {
		f.Add(s, "v")
	}
	f.Fuzz(func(t *testing.T, s, value string) {
		tm, err := parseTemplate(s)
		matches := refGrammar.FindAllStringSubmatchIndex(s, -1)
		if err != nil {
			if !strings.Contains(s, "{"+Root) {
				t.Fatalf("%q without a reference refused: %v", s, err)
			}
			bad := strings.Count(s, "{"+Root) > len(matches)
			for _, m := range matches {
				if _, perr := ParsePath(s[m[2]:m[3]]); perr != nil {
					bad = true
				}
			}
			if !bad {
				t.Fatalf("%q refused (%v), its references all paths", s, err)
			}
			return
		}
		var back strings.Builder
		var refs []int
		for _, p := range tm.parts {
			if back.Len() != p.offset {
				t.Fatalf("%q: part at offset %d, written back at %d", s, p.offset, back.Len())
			}
			if p.isRef {
				refs = append(refs, p.offset)
				back.WriteString("{" + p.ref.String() + "}")
			} else {
				back.WriteString(p.text)
			}
		}
		if back.String() != s {
			t.Fatalf("%q written back as %q", s, back.String())
		}
		if len(refs) != len(matches) {
			t.Fatalf("%q: %d references, refGrammar finds %d", s, len(refs), len(matches))
		}
		for i, m := range matches {
			if refs[i] != m[0] {
				t.Fatalf("%q: reference %d at %d, refGrammar's at %d", s, i, refs[i], m[0])
			}
		}
		get := func(Path) (any, error) { return value, nil }
		got, err := tm.render(get, nil)
		if want := refGrammar.ReplaceAllLiteralString(s, value); err != nil || got != want {
			t.Fatalf("%q rendered %q (%v), want %q", s, got, err, want)
		}
		v, err := resolveValue(s, func(Path) (any, error) { return 42.5, nil })
		if err != nil {
			t.Fatal(err)
		}
		whole := len(matches) == 1 && matches[0][0] == 0 && matches[0][1] == len(s)
		if n, ok := v.(float64); whole != (ok && n == 42.5) {
			t.Fatalf("%q (one reference: %v) resolved to %#v", s, whole, v)
		}
	})
}

// FuzzURLTemplate: any ApiCall url, with any value its references
// resolve to. parseURLTemplate never panics; a url it takes, resolved as
// the executor resolves it (escapeURLPart), is an http or https URL to
// the host that the url names before anything runs (its form with every
// reference as "ref", which the policy checks at validation), without
// user information; and a value adds no path segment, query parameter or
// fragment: it stays inside the part it was put in.
func FuzzURLTemplate(f *testing.F) {
	for _, s := range []string{"https://api.example.com/users/{/workflow/_loop/item.id}",
		"http://h:8080/a/{/workflow/x}?q={/workflow/y}&r=1#{/workflow/z}", "https://{/workflow/host}/x",
		"https://a.com{/workflow/x}", "https://a.com:{/workflow/p}/", "https://u@a.com/{/workflow/x}",
		"ftp://a.com/{/workflow/x}", "https:a.com/{/workflow/x}", "https://a.com/x{/workflow/x}y", "https://[::1]:8443/{/workflow/x}"} {
		f.Add(s, "v")
		f.Add(s, "../@evil.com/?a=b&c#d")
	}
	f.Fuzz(func(t *testing.T, raw, value string) {
		tm, err := parseURLTemplate(raw)
		if err != nil {
			return
		}
		static, err := tm.render(func(Path) (any, error) { return "ref", nil }, nil)
		if err != nil {
			t.Fatal(err)
		}
		su, err := url.Parse(static)
		if err != nil {
			t.Fatalf("%q taken, its static form %q is no URL: %v", raw, static, err)
		}
		got, err := tm.render(func(Path) (any, error) { return value, nil }, escapeURLPart)
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(got)
		if err != nil {
			if len(tm.refs()) == 0 {
				t.Fatalf("%q taken, no URL: %v", raw, err)
			}
			return // the executor answers a DataError, sends nothing
		}
		if u.Scheme != su.Scheme || u.Host != su.Host || u.User != nil || (u.Scheme != "http" && u.Scheme != "https") {
			t.Fatalf("%q with %q resolved to %q: %s://%s (user %v), the url names %s://%s", raw, value, got, u.Scheme, u.Host, u.User, su.Scheme, su.Host)
		}
		if x, y := urlParts(got), urlParts(static); x != y {
			t.Fatalf("%q with %q resolved to %q: its parts %v, the url's %v", raw, value, got, x, y)
		}
	})
}

// urlParts counts, in an http(s) URL as written, what delimits its parts
// after the authority: the path's "/", every "?" and "#", and the query's
// "&", ";" and "=".
func urlParts(s string) [5]int {
	rest := s[strings.Index(s, "://")+3:]
	rest = rest[strings.IndexAny(rest+"/", "/?#"):]
	path, query := rest, ""
	if k := strings.IndexByte(path, '#'); k >= 0 {
		path = path[:k]
	}
	if k := strings.IndexByte(path, '?'); k >= 0 {
		path, query = path[:k], path[k+1:]
	}
	return [5]int{strings.Count(path, "/"), strings.Count(rest, "?"), strings.Count(rest, "#"),
		strings.Count(query, "&") + strings.Count(query, ";"), strings.Count(query, "=")}
}
