// Command e2a is the E2A Pipeline binary: one process can run every stage
// (`e2a dev`), or one stage each against an external NATS cluster.
//
// It is thin on purpose: configuration, wiring and subcommands; the logic
// lives in the packages of the module.
package main
