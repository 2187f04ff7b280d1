// Package option holds what the packages' functional options share. A
// package whose options are func(*C) error (agent, push, the console …)
// writes a setter of a required value as
//
//	func WithLogger(l *slog.Logger) Option {
//		return option.NotNil(ErrInvalidOption, "logger", l, func(o *options) { o.log = l })
//	}
//
// and a setter of a value with a range or a rule as a Check of it
// (option.Check(ErrInvalidOption, n >= 1, set, "scan budget %d < 1", n)):
// its bad value is refused as the package's other options refuse theirs,
// with an error wrapping the package's ErrInvalidOption.
package option
