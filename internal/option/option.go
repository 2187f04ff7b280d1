package option

import "fmt"

// NotNil returns an option that applies set, or refuses a nil v with an
// error wrapping errInvalid ("<errInvalid>: nil <what>"). v is a pointer,
// an interface or another comparable type whose zero value is refused; a
// func is not comparable and checks itself.
func NotNil[C any, T comparable](errInvalid error, what string, v T, set func(*C)) func(*C) error {
	return func(c *C) error {
		var zero T
		if v == zero {
			return fmt.Errorf("%w: nil %s", errInvalid, what)
		}
		set(c)
		return nil
	}
}
