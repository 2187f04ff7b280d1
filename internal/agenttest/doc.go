// Package agenttest holds what tests of agents (the bridges' upstreams, a
// handler) share without a NATS server: [Writer], an agent.Writer that
// checks every frame as the runtime's writer does and records what it
// took. The runtime's own writer is tested against JetStream in package
// agent; this one is for tests and fuzz targets that call an upstream or a
// handler directly, many times a second.
package agenttest
