// Package jsonstr appends Go strings as JSON strings byte for byte as
// encoding/json writes them, without reflection or allocation: the frame
// encoder of agent and the pre-encoded A2A events of egress use it on their
// hot paths.
package jsonstr
