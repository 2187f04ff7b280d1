package a2abridge

// UpstreamError is upstreamError, for the tests of package a2abridge_test.
var UpstreamError = upstreamError
