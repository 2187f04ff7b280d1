package a2aupstream

import "errors"

// ErrInvalidOption is wrapped by every error New, Start and SetFault return
// for options they cannot serve: an unknown binding, a fault kind the
// binding has no form for (garbage bytes on gRPC), a status that is not an
// HTTP error status, a negative count or interval.
var ErrInvalidOption = errors.New("a2aupstream: invalid option")
