package option

import (
	"errors"
	"fmt"
)

// NotNil returns an option that applies set, or refuses a nil v with an
// error wrapping errInvalid ("<errInvalid>: nil <what>"). v is a pointer,
// an interface or another comparable type whose zero value is refused; a
// func is not comparable: its option is a Check of f != nil.
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

// Check returns an option that applies set when ok (the check of its
// value, made where the option is built) holds, or refuses the value with
// an error wrapping errInvalid ("<errInvalid>: <format, a...>"):
//
//	func WithPollInterval(d time.Duration) Option {
//		return option.Check(ErrInvalidOption, d > 0, func(o *options) { o.poll = d }, "poll interval %v ≤ 0", d)
//	}
func Check[C any](errInvalid error, ok bool, set func(*C), format string, a ...any) func(*C) error {
	return func(c *C) error {
		if !ok {
			return fmt.Errorf("%w: %s", errInvalid, fmt.Sprintf(format, a...))
		}
		set(c)
		return nil
	}
}

// Apply applies opts to c in order and returns the first error, which
// wraps errInvalid (an option's own error that does not is wrapped: a
// package's options all refuse with its ErrInvalidOption, whatever else
// the error says). A nil option is refused with an error wrapping
// errInvalid ("<errInvalid>: nil option"), never called: a nil func in a
// caller's option list is a bad option like any other, not a panic.
func Apply[C any, O ~func(*C) error](errInvalid error, c *C, opts []O) error {
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: nil option", errInvalid)
		}
		if err := o(c); err != nil {
			if !errors.Is(err, errInvalid) {
				err = fmt.Errorf("%w: %w", errInvalid, err)
			}
			return err
		}
	}
	return nil
}
