package workflow

import (
	"fmt"
	"strings"
)

// template is a string with {/workflow/...} references.
type template struct {
	raw   string
	parts []tmplPart
}

type tmplPart struct {
	text  string
	ref   Path
	isRef bool
	// offset of the part in raw
	offset int
}

// parseTemplate splits s into literal text and references. Only braces
// holding a path that starts with /workflow are references; other braces
// are literal text.
func parseTemplate(s string) (template, error) {
	t := template{raw: s}
	i := 0
	for {
		j := strings.Index(s[i:], "{"+Root)
		if j < 0 {
			if i < len(s) {
				t.parts = append(t.parts, tmplPart{text: s[i:], offset: i})
			}
			return t, nil
		}
		j += i
		k := strings.IndexByte(s[j:], '}')
		if k < 0 {
			return t, fmt.Errorf("reference at offset %d is not closed with }", j)
		}
		k += j
		p, err := ParsePath(s[j+1 : k])
		if err != nil {
			return t, err
		}
		if j > i {
			t.parts = append(t.parts, tmplPart{text: s[i:j], offset: i})
		}
		t.parts = append(t.parts, tmplPart{ref: p, isRef: true, offset: j})
		i = k + 1
	}
}

// refs returns the paths the template reads.
func (t template) refs() []Path {
	var out []Path
	for _, p := range t.parts {
		if p.isRef {
			out = append(out, p.ref)
		}
	}
	return out
}

// whole returns the reference when the template is exactly one reference.
func (t template) whole() (Path, bool) {
	if len(t.parts) == 1 && t.parts[0].isRef {
		return t.parts[0].ref, true
	}
	return Path{}, false
}

// render resolves the references with get; escape transforms each
// resolved value (given the literal text before it) before insertion.
func (t template) render(get func(Path) (any, error), escape func(before, value string) string) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if !p.isRef {
			b.WriteString(p.text)
			continue
		}
		v, err := get(p.ref)
		if err != nil {
			return "", err
		}
		s := stringify(v)
		if escape != nil {
			s = escape(b.String(), s)
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// valueRefs collects the references inside a JSON value (strings anywhere).
func valueRefs(v any) ([]Path, error) {
	var out []Path
	var walk func(any) error
	walk = func(v any) error {
		switch t := v.(type) {
		case string:
			tm, err := parseTemplate(t)
			if err != nil {
				return err
			}
			out = append(out, tm.refs()...)
		case map[string]any:
			for _, x := range t {
				if err := walk(x); err != nil {
					return err
				}
			}
		case []any:
			for _, x := range t {
				if err := walk(x); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err := walk(v)
	return out, err
}

// resolveValue replaces references inside a JSON value: a string that is
// exactly one reference becomes the referenced value (any type); a string
// with references inside text gets their text rendering.
func resolveValue(v any, get func(Path) (any, error)) (any, error) {
	switch t := v.(type) {
	case string:
		tm, err := parseTemplate(t)
		if err != nil {
			return nil, err
		}
		if p, ok := tm.whole(); ok {
			return get(p)
		}
		if len(tm.refs()) == 0 {
			return t, nil
		}
		return tm.render(get, nil)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			r, err := resolveValue(x, get)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		return mapList(t, func(x any) (any, error) { return resolveValue(x, get) })
	}
	return v, nil
}
