package workflow

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Root is the prefix of every data-model path.
const Root = "/workflow"

// LoopVar is the data-model key a Loop writes for its operations: inside an
// iteration /workflow/_loop/item is the current element and
// /workflow/_loop/index its index. The key is reserved: no operation may
// write it.
const LoopVar = "_loop"

// maxIndex bounds array indices in paths.
const maxIndex = 1 << 20

type segment struct {
	key   string
	index int
	isIdx bool
}

func (s segment) String() string {
	if s.isIdx {
		return "[" + strconv.Itoa(s.index) + "]"
	}
	return "." + s.key
}

// Path is a parsed data-model path such as /workflow/users[0].name. The
// segments after /workflow are separated by "/" or "." (property access) and
// "[n]" (array index); both separators mean the same thing, so
// /workflow/a/b and /workflow/a.b name one location.
type Path struct {
	raw  string
	segs []segment
}

// String returns the path as written.
func (p Path) String() string { return p.raw }

// IsZero reports whether p is the zero Path.
func (p Path) IsZero() bool { return p.raw == "" }

// canonical returns the path in one spelling: /workflow/a.b[0].c.
func (p Path) canonical() string {
	var b strings.Builder
	b.WriteString(Root)
	for i, s := range p.segs {
		if s.isIdx {
			b.WriteString(s.String())
			continue
		}
		if i == 0 {
			b.WriteString("/" + s.key)
		} else {
			b.WriteString("." + s.key)
		}
	}
	return b.String()
}

// overlaps reports whether one path is a prefix of the other, segment-wise:
// writing one makes the other (or a part of it) exist.
func (p Path) overlaps(q Path) bool {
	n := min(len(p.segs), len(q.segs))
	for i := 0; i < n; i++ {
		if p.segs[i] != q.segs[i] {
			return false
		}
	}
	return true
}

// ParsePath parses an absolute data-model path. It must start with
// /workflow; /workflow alone names the whole data model.
func ParsePath(s string) (Path, error) {
	if s == Root {
		return Path{raw: s}, nil
	}
	if !strings.HasPrefix(s, Root+"/") {
		return Path{}, fmt.Errorf("path %q must start with %s/", s, Root)
	}
	segs, err := parseSegments(s[len(Root):], true)
	if err != nil {
		return Path{}, fmt.Errorf("path %q: %w", s, err)
	}
	return Path{raw: s, segs: segs}, nil
}

// parseField parses a path relative to an element, such as "address.city"
// or "tags[0]". The empty string names the element itself.
func parseField(s string) ([]segment, error) {
	if s == "" {
		return nil, nil
	}
	if s[0] != '[' && s[0] != '.' && s[0] != '/' {
		s = "." + s
	}
	segs, err := parseSegments(s, false)
	if err != nil {
		return nil, fmt.Errorf("field %q: %w", s, err)
	}
	return segs, nil
}

func isKeyChar(c byte) bool {
	switch c {
	case '/', '.', '[', ']', '{', '}', ' ', '\t', '\r', '\n':
		return false
	}
	return c >= 0x20 && c != 0x7f
}

func parseSegments(s string, absolute bool) ([]segment, error) {
	var segs []segment
	i := 0
	for i < len(s) {
		switch c := s[i]; c {
		case '/', '.':
			j := i + 1
			for j < len(s) && isKeyChar(s[j]) {
				j++
			}
			if j == i+1 {
				return nil, fmt.Errorf("empty property name at offset %d", i)
			}
			segs = append(segs, segment{key: s[i+1 : j]})
			i = j
		case '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return nil, errors.New("unclosed [")
			}
			// Decimal digits only: Atoi also reads a sign ("-0" was
			// index 0).
			digits := s[i+1 : i+j]
			n, err := strconv.Atoi(digits)
			if err != nil || n > maxIndex || strings.TrimLeft(digits, "0123456789") != "" {
				return nil, fmt.Errorf("bad array index %q", digits)
			}
			if len(segs) == 0 && absolute {
				return nil, errors.New("an index needs a property before it")
			}
			segs = append(segs, segment{index: n, isIdx: true})
			i += j + 1
		default:
			return nil, fmt.Errorf("unexpected %q at offset %d", c, i)
		}
	}
	return segs, nil
}

// errPathMissing reports a path whose location does not exist.
var errPathMissing = errors.New("path does not exist")

// lookup follows segs from v.
func lookup(v any, segs []segment) (any, bool) {
	for _, s := range segs {
		if s.isIdx {
			a, ok := v.([]any)
			if !ok || s.index >= len(a) {
				return nil, false
			}
			v = a[s.index]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		v, ok = m[s.key]
		if !ok {
			return nil, false
		}
	}
	return v, true
}

// setIn returns a copy of container with value stored at segs. Containers
// along the path are copied (copy on write), so values shared between two
// locations of the data model never change behind the other's back.
// Missing objects are created; an index may address an existing element or
// append at the end of an array.
func setIn(container any, segs []segment, value any) (any, error) {
	if len(segs) == 0 {
		return value, nil
	}
	s := segs[0]
	if s.isIdx {
		var a []any
		switch t := container.(type) {
		case []any:
			a = t
		case nil:
		default:
			return nil, fmt.Errorf("cannot index %s with [%d]", typeName(container), s.index)
		}
		if s.index > len(a) {
			return nil, fmt.Errorf("index [%d] is past the end of an array of %d", s.index, len(a))
		}
		out := make([]any, len(a), max(len(a), s.index+1))
		copy(out, a)
		var cur any
		if s.index < len(a) {
			cur = a[s.index]
		}
		nv, err := setIn(cur, segs[1:], value)
		if err != nil {
			return nil, err
		}
		if s.index == len(a) {
			out = append(out, nv)
		} else {
			out[s.index] = nv
		}
		return out, nil
	}
	var m map[string]any
	switch t := container.(type) {
	case map[string]any:
		m = t
	case nil:
	default:
		return nil, fmt.Errorf("cannot set property %q on %s", s.key, typeName(container))
	}
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	nv, err := setIn(m[s.key], segs[1:], value)
	if err != nil {
		return nil, err
	}
	out[s.key] = nv
	return out, nil
}

// Data is the data model of one execution: the object named /workflow.
// It is not safe for concurrent use.
type Data struct {
	root map[string]any
}

// NewData returns an empty data model.
func NewData() *Data { return &Data{root: map[string]any{}} }

// Get returns the value at p.
func (d *Data) Get(p Path) (any, bool) {
	return lookup(d.root, p.segs)
}

// Set stores v at p. /workflow itself cannot be replaced.
func (d *Data) Set(p Path, v any) error {
	if len(p.segs) == 0 {
		return fmt.Errorf("cannot replace %s itself", Root)
	}
	nv, err := setIn(d.root, p.segs, v)
	if err != nil {
		return fmt.Errorf("%s: %w", p.raw, err)
	}
	d.root = nv.(map[string]any)
	return nil
}

// Snapshot returns the data model as a JSON object.
func (d *Data) Snapshot() map[string]any { return d.root }

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	if _, ok := toNumber(v); ok {
		return "number"
	}
	return fmt.Sprintf("%T", v)
}
