// Package jsonstr appends Go strings as JSON strings byte for byte as
// encoding/json writes them, scans the members of a JSON object
// ([Members]), validates JSON as json.Valid does ([Valid]) or does both in
// one pass ([ValidMembers]), bounds nesting ([Deeper]), without reflection
// or allocation, and decodes free-form JSON values as a json.Decoder with
// UseNumber does ([Value], [Object], [String]): the frame encoder of agent,
// the pre-encoded A2A events and the frame scans of egress, the envelope
// reader of e2a, the normalizer's A2A params reader and the bench's load
// generator use it on their hot paths. [MarshalNoEscape] is json.Marshal
// without HTML escaping (the normalizer's workflow lines, push's stored
// configs).
package jsonstr
