package a2abridge

// UpstreamError is upstreamError, for the tests of package a2abridge_test.
var UpstreamError = upstreamError

// ParseCard is parseEitherCard (a card's body, v1.0 or v0.3), for the
// tests of package a2abridge_test.
var ParseCard = parseEitherCard
