package egress

// RunACPClient runs acp-go-sdk's client against an ACP rendering served by
// serve, for the tests of package egress_test.
var RunACPClient = runACPClient
