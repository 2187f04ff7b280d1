package agent

// WithStaleCancelMargin sets how much older than a request a cancel of its
// id must be to be ignored (tests: 0, so that a cancel stored a moment
// before the request is an earlier request's).
var WithStaleCancelMargin = withStaleCancelMargin
