// Package outbound is what the calls to addresses that clients and
// workflows name share (push notification webhooks, A2E workflow
// ApiCalls): which addresses such a call may not reach unless an operator
// allows them ([Special]), and an HTTP transport that resolves the host
// itself and dials only an address that passed its check ([Transport],
// [Dial]), so that a name cannot resolve to a private address between the
// check and the connection; "localhost" and the names under it are the
// loopback addresses, never asked of a resolver ([Resolve]).
//
// The policies stay with their packages: push refuses every special
// address of a host its allow-list does not name; a workflow's Policy
// also admits its AllowedNets and the IP literals its rules name. A
// bridge's upstream is the operator's own configuration and is dialled
// as configured.
package outbound
