package console

import (
	"errors"
	"fmt"
)

// ErrInvalidOption reports an option value New refuses; New's error wraps
// it (test with errors.Is). ErrBadQuery (list.go) reports a bad list query.
var ErrInvalidOption = errors.New("console: invalid option")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOption, fmt.Sprintf(format, a...))
}
