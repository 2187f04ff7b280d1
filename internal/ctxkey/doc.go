// Package ctxkey gives the values of one type their own key in a
// context.Context, instead of a key type and a pair of functions (one that
// stores, one that reads and asserts the type) written out for each:
//
//	var principalKey = ctxkey.New[Principal]("ingress principal")
//
//	ctx = principalKey.With(ctx, p)
//	p, ok := principalKey.From(ctx)
package ctxkey
