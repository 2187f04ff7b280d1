package egress

import "time"

// SetNow makes the renderers' clock f, for the conformance suite of
// package egress_test, and returns the function that restores it.
func SetNow(f func() time.Time) (restore func()) {
	old := now
	now = f
	return func() { now = old }
}

// RunACPClient runs acp-go-sdk's client against an ACP rendering served by
// serve, for the tests of package egress_test.
var RunACPClient = runACPClient

// RunA2AClient runs a2a-go's client against A2A's renderers served by the
// service, for the tests of package egress_test.
var RunA2AClient = runA2AClient

// RunEndToEnd runs the demo agent end to end, its answer replayed to
// a2a-go's client with A2A's renderers, for the tests of package
// egress_test.
var RunEndToEnd = runEndToEnd
