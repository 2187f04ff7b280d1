package audit

import "errors"

// ErrInvalidOption reports an Option given a value out of its range (New
// returns it wrapped, naming the option).
var ErrInvalidOption = errors.New("audit: invalid option")
