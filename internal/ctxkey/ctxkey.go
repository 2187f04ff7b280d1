package ctxkey

import "context"

// Key is the key of values of type T in a context. Each Key New returns is
// its own: two keys of the same T never see each other's values.
type Key[T any] struct{ name string }

// New returns a new key; name is what its String says (a context's String
// shows it).
func New[T any](name string) *Key[T] { return &Key[T]{name: name} }

// With returns ctx carrying v under k.
func (k *Key[T]) With(ctx context.Context, v T) context.Context {
	return context.WithValue(ctx, k, v)
}

// From returns the value stored under k in ctx (by With), and whether
// there is one.
func (k *Key[T]) From(ctx context.Context) (T, bool) {
	v, ok := ctx.Value(k).(T)
	return v, ok
}

// String is the key's name.
func (k *Key[T]) String() string { return k.name }
