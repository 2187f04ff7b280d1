package normalizer_test

import (
	"cmp"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/normalizer"
)

// FuzzRoutes: any E2A_ROUTES value, and any envelope method, ext_method
// and channel routed by it. ParseRoutes never panics; a refusal is one
// line, escaped (no control character of the value); accepted routes
// written by String parse back to the same routes, and String of those
// is the same text. Pool agrees with the documented rule read apart
// (pickPool), which settles every tie in one way: a router that picked
// among rules by map order would route one envelope to two pools.
func FuzzRoutes(f *testing.F) {
	for _, s := range []string{
		"default=demo; method:a2e.workflow.execute=workflow; method:tool/*=tools; channel:feishu=feishu",
		" default=demo , method:a2e.workflow.execute=wf;channel:web=web ;; ",
		"method:a*=first; method:e*=second",
		"method:*=any; method:session/*=acp; method:session/prompt=prompt",
		"method:x=y=z", "default", "pool:x=y", "method:m=*", "channel:\x00=p",
	} {
		f.Add(s, "ext", "abc", "feishu")
		f.Add(s, "session/prompt", "", "")
	}
	f.Fuzz(func(t *testing.T, spec, method, ext, channel string) {
		r, err := normalizer.ParseRoutes(spec)
		if err != nil {
			msg := err.Error()
			if !utf8.ValidString(msg) || strings.ContainsFunc(msg, unicode.IsControl) {
				t.Fatalf("refusal not escaped: %q", msg)
			}
			return
		}
		s := r.String()
		back, err := normalizer.ParseRoutes(s)
		if err != nil {
			t.Fatalf("String %q of accepted routes refused: %v", s, err)
		}
		if !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip through %q: %+v, want %+v", s, back, r)
		}
		if again := back.String(); again != s {
			t.Fatalf("String not stable: %q then %q", s, again)
		}
		env := &e2a.Envelope{Method: method, ExtMethod: ext, Channel: channel}
		if got, want := r.Pool(env), pickPool(r, env); got != want {
			t.Fatalf("routes %q: %+v goes to %q, want %q", s, env, got, want)
		}
	})
}

// pickPool is Routes' rule as its comment states it, written apart: an
// exact method rule (for method "ext", ext_method first), else the
// longest wildcard rule prefixing a method (ext_method's on a tie, as it
// is tried first), else the channel's, the built-in workflow rule, the
// default.
func pickPool(r normalizer.Routes, env *e2a.Envelope) string {
	methods := []string{env.Method}
	if env.Method == "ext" && env.ExtMethod != "" {
		methods = []string{env.ExtMethod, "ext"}
	}
	for _, m := range methods {
		if p, ok := r.Methods[m]; ok && m != "" {
			return p
		}
	}
	// Every wildcard rule prefixing a method, ranked by its prefix's
	// length, then by the method's place (ext_method before "ext").
	type candidate struct {
		length, place int
		pool          string
	}
	var ranked []candidate
	for place, m := range methods {
		for k, p := range r.Methods {
			if prefix, wild := strings.CutSuffix(k, "*"); wild && strings.HasPrefix(m, prefix) {
				ranked = append(ranked, candidate{len(prefix), place, p})
			}
		}
	}
	slices.SortFunc(ranked, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(b.length, a.length), cmp.Compare(a.place, b.place))
	})
	switch {
	case len(ranked) > 0:
		return ranked[0].pool
	case env.Channel != "" && r.Channels[env.Channel] != "":
		return r.Channels[env.Channel]
	case env.Method == normalizer.MethodWorkflowExecute:
		return normalizer.WorkflowPool
	case r.Default != "":
		return r.Default
	}
	return normalizer.DefaultPool
}
