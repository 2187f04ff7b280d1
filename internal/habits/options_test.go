package habits

import (
	"go/ast"
	"go/token"
	"sort"
	"strings"
	"testing"
)

// optionLoopAllowed are the production functions that still call their
// options in a loop of their own, keyed "dir/file.go:Func", each with the
// reason. Every other package applies its func(*C) error options with
// internal/option.Apply, which refuses a nil option with the package's
// ErrInvalidOption instead of calling it (a panic).
var optionLoopAllowed = map[string]string{
	"ingress/auth_config.go:NewAuth":                    "its options are func(*C), infallible: the config is checked after",
	"ingress/ratelimit.go:NewLimiter":                   "its options are func(*C), infallible",
	"ingress/ratelimit_bucket.go:RateLimitBucketConfig": "its options are func(*C), infallible",
	"internal/option/option.go:Apply":                   "the one loop",
	"internal/pipetest/pipetest.go:Start":               "test support: its options are func(*C), infallible",
}

// TestOptionsApplied fails for a production function that calls each of
// its opts in a `for … range opts` loop and is not on optionLoopAllowed,
// and for an entry of the list that no longer does.
func TestOptionsApplied(t *testing.T) {
	root := moduleRoot(t)
	found := map[string]bool{}
	files := 0
	eachGoFile(t, root, 0, func(name string) bool { return !strings.HasSuffix(name, "_test.go") }, func(_ *token.FileSet, rel string, file *ast.File) {
		files++
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if r, ok := n.(*ast.RangeStmt); ok && callsEach(r, "opts") {
					found[rel+":"+fn.Name.Name] = true
				}
				return true
			})
		}
	})
	if files < 100 {
		t.Fatalf("read only %d production files under %s: the walk is broken", files, root)
	}
	keys := make([]string, 0, len(found))
	for k := range found {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := optionLoopAllowed[k]; !ok {
			t.Errorf("%s applies its options in a loop of its own: use option.Apply (internal/option), which refuses a nil option with the package's ErrInvalidOption", k)
		}
	}
	for k := range optionLoopAllowed {
		if !found[k] {
			t.Errorf("%s is on optionLoopAllowed but has no option loop: take it off", k)
		}
	}
}

// callsEach reports whether r ranges over the identifier list and calls
// its value variable in its body.
func callsEach(r *ast.RangeStmt, list string) bool {
	x, ok := r.X.(*ast.Ident)
	v, vok := r.Value.(*ast.Ident)
	if !ok || !vok || x.Name != list {
		return false
	}
	calls := false
	ast.Inspect(r.Body, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if f, ok := c.Fun.(*ast.Ident); ok && f.Name == v.Name {
				calls = true
			}
		}
		return !calls
	})
	return calls
}
