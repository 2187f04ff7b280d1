package natstest

import "errors"

// ErrInvalidOption reports an option value RunServer and RunCluster
// refuse. Being test helpers, they fail the test with it (t.Fatal) rather
// than return it: every caller would otherwise check an error that only a
// typo in the test itself can cause.
var ErrInvalidOption = errors.New("natstest: invalid option")
