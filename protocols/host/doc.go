// Package host is what a protocol package's front door needs from the
// pipeline that mounts it: the gate (authentication and rate limit,
// refused in the protocol's own error shape), the normalizer and the
// caller's view of a request for it, the publish of an envelope, and the
// answer of an accepted request from its frames with one of egress's
// renderers.
//
// It is a leaf: the protocol packages (protocols/<name>) import it and
// cannot import ingress, which implements [Host] over its server and
// mounts each protocol's [Route]s from the registry (package protocols).
// A protocol package only sees these small interfaces, so it can be tested
// over a fake host, and ingress stays the one owner of authentication,
// tenancy, publishing and metrics.
package host
