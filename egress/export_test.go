package egress

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
