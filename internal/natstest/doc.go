// Package natstest starts real JetStream servers for tests: RunServer for a
// single embedded server with the E2A streams applied, RunCluster for an
// in-process cluster of JetStream servers with replicated streams, whose
// nodes can be killed and restarted.
//
// Servers listen on random loopback ports, keep their data in t.TempDir(),
// and are shut down by t.Cleanup. Nothing is ever skipped. Options
// validate their values: a bad one fails the test with an error wrapping
// ErrInvalidOption.
package natstest
