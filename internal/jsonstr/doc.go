// Package jsonstr appends Go strings as JSON strings byte for byte as
// encoding/json writes them, and scans the members of a JSON object
// ([Members]), without reflection or allocation: the frame encoder of
// agent, the pre-encoded A2A events and the frame scans of egress, and the
// bench's load generator use it on their hot paths.
package jsonstr
