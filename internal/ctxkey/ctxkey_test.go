package ctxkey_test

import (
	"context"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/ctxkey"
)

type principal struct{ id string }

func TestKey(t *testing.T) {
	a := ctxkey.New[principal]("a principal")
	b := ctxkey.New[principal]("b principal")
	n := ctxkey.New[int]("n")

	ctx := context.Background()
	if p, ok := a.From(ctx); ok || p != (principal{}) {
		t.Fatalf("an empty context: %v %v", p, ok)
	}
	ctx = a.With(ctx, principal{"alice"})
	ctx = n.With(ctx, 7)
	if p, ok := a.From(ctx); !ok || p.id != "alice" {
		t.Fatalf("a: %v %v", p, ok)
	}
	if p, ok := b.From(ctx); ok {
		t.Fatalf("b, a key of the same type, saw a's value %v", p)
	}
	if v, ok := n.From(ctx); !ok || v != 7 {
		t.Fatalf("n: %v %v", v, ok)
	}
	ctx = a.With(ctx, principal{"bob"}) // the nearest value wins
	if p, _ := a.From(ctx); p.id != "bob" {
		t.Fatalf("a after a second With: %v", p)
	}
	if s := a.String(); s != "a principal" || !strings.Contains(ctx.(interface{ String() string }).String(), "a principal") {
		t.Fatalf("String: %q, context %q", s, ctx)
	}
}
