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

// Apply applies opts to c in order and returns the first error. A nil
// option is refused with an error wrapping errInvalid ("<errInvalid>: nil
// option"), never called: a nil func in a caller's option list is a bad
// option like any other, not a panic.
func Apply[C any, O ~func(*C) error](errInvalid error, c *C, opts []O) error {
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: nil option", errInvalid)
		}
		if err := o(c); err != nil {
			return err
		}
	}
	return nil
}
