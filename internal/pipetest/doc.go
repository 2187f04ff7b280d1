// Package pipetest starts the whole pipeline in a test process: an embedded
// JetStream server on a random loopback port, ingress and egress on an
// httptest server (and, on request, the A2A v1.0 gRPC binding on its own
// listener), and any agent pools. It is what tests of agents and bridges
// use to drive a pool through every front door with the real clients.
//
// Parts of it serve alone too: egress's read API over a History
// (ServeHistory, e.g. internal/audit's Auditor) and the API keys of an
// ingress.Auth (KeyAuth).
package pipetest
