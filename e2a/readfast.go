package e2a

import (
	"encoding/json"
	"strings"

	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
)

// fastRead enables fromJSONFast; the differential test turns it off.
var fastRead = true

// The members FromJSON reads: readEnvelopeField's and the compatibility
// keys. fromJSONFast keeps each one's value by its index here.
var envelopeKeys = [...]string{
	"protocol_version", "request_id", "jsonrpc_id", "correlation_id", "task_id", "context_id", "session_id",
	"channel", "method", "message_id", "is_stream", "timestamp", "identity_origin", "user_id", "source_agent_id",
	"params", "provenance", "ext_method", "session_update_kind", "expected_output_modes", "auth",
	"channel_context", "a2a_metadata", "acp_meta", "deadline", "trace",
	// compatibility keys (FromJSON's second part)
	"channel_id", "req_method", "metadata", "binding", "payload",
}

// Indexes of the compatibility keys in envelopeKeys.
const (
	keyChannelID = len(envelopeKeys) - 5 + iota
	keyReqMethod
	keyMetadata
	keyBinding
	keyPayload
)

func envelopeKey(k []byte) int {
	for i, name := range envelopeKeys {
		if string(k) == name {
			return i
		}
	}
	return -1
}

// rawMembers is an envelope's known members, as json.Unmarshal into a
// map[string]json.RawMessage gives them (sub-slices of the input; the readers
// copy what they keep).
type rawMembers [len(envelopeKeys)][]byte

func (r *rawMembers) get(i int) json.RawMessage { return r[i] }

// fromJSONFast is FromJSON for valid JSON whose members are each written
// once with plain keys (the envelopes the pipeline writes): the members are
// found by a scan instead of a map of copies, and free-form objects are
// read without a json.Decoder each. ok is false for any other input, which
// FromJSON reads on its general path (its answer is the same:
// TestFromJSONFastMatches, FuzzFromJSONFast).
func fromJSONFast(data []byte) (env *Envelope, ok bool, err error) {
	if !jsonstr.Valid(data) {
		return nil, false, nil
	}
	var raw rawMembers
	var seen uint64
	dup := false
	if !jsonstr.Members(data, func(key, val []byte) bool {
		i := envelopeKey(key)
		if i < 0 {
			return true // not read, as on the general path
		}
		if seen&(1<<i) != 0 {
			dup = true // the general path keeps the last: leave it to it
			return false
		}
		seen |= 1 << i
		raw[i] = val
		return true
	}) || dup {
		return nil, false, nil
	}
	var e Envelope
	for i, v := range raw[:keyChannelID] {
		if v == nil {
			continue
		}
		if err := readEnvelopeField(&e, envelopeKeys[i], v); err != nil {
			return nil, true, fieldError(envelopeKeys[i], err)
		}
	}
	if err := e.readCompat(raw.get); err != nil {
		return nil, true, err
	}
	return &e, true, nil
}

// readObjectFast reads a free-form object as decodeNumbers does into a
// map[string]any, from valid JSON; ok is false for a value that is not an
// object (decodeNumbers then gives its error).
func readObjectFast(v []byte) (map[string]any, bool) {
	i := jsonstr.SkipSpace(v, 0)
	if i >= len(v) || v[i] != '{' {
		return nil, false
	}
	m, _, ok := anyObject(v, i)
	return m, ok
}

// anyValue decodes the valid JSON value at v[i:] as json.Decoder with
// UseNumber decodes into an any: objects as map[string]any, arrays as
// []any, numbers as json.Number. It returns the index after the value.
func anyValue(v []byte, i int) (any, int, bool) {
	i = jsonstr.SkipSpace(v, i)
	if i >= len(v) {
		return nil, i, false
	}
	switch v[i] {
	case '{':
		return anyObject(v, i)
	case '[':
		out := []any{}
		i++
		for {
			next, done, ok := nextItem(v, i, ']')
			if !ok || done {
				return out, next, ok
			}
			x, end, ok := anyValue(v, next)
			if !ok {
				return nil, end, false
			}
			out = append(out, x)
			i = end
		}
	case '"':
		end := jsonstr.SkipString(v, i)
		if end > len(v) {
			return nil, end, false
		}
		s, ok := anyString(v[i:end])
		return s, end, ok
	case 't':
		return true, i + 4, true
	case 'f':
		return false, i + 5, true
	case 'n':
		return nil, i + 4, true
	}
	end := jsonstr.SkipValue(v, i)
	if end <= i {
		return nil, end, false
	}
	return json.Number(string(v[i:end])), end, true
}

// nextItem skips white space and commas to the next member or element of
// the object or array being read; done reports its closing byte (next is
// then the index after it).
func nextItem(v []byte, i int, closing byte) (next int, done, ok bool) {
	for {
		i = jsonstr.SkipSpace(v, i)
		if i >= len(v) {
			return i, false, false
		}
		switch v[i] {
		case closing:
			return i + 1, true, true
		case ',':
			i++
			continue
		}
		return i, false, true
	}
}

// anyObject decodes the object at v[i] (a '{').
func anyObject(v []byte, i int) (map[string]any, int, bool) {
	m := map[string]any{}
	i++
	for {
		next, done, ok := nextItem(v, i, '}')
		if !ok || done {
			return m, next, ok
		}
		i = next
		if v[i] != '"' {
			return nil, i, false
		}
		end := jsonstr.SkipString(v, i)
		if end > len(v) {
			return nil, end, false
		}
		k, ok := anyString(v[i:end])
		if !ok {
			return nil, end, false
		}
		i = jsonstr.SkipSpace(v, end)
		if i >= len(v) || v[i] != ':' {
			return nil, i, false
		}
		x, next, ok := anyValue(v, i+1)
		if !ok {
			return nil, next, false
		}
		m[k] = x // a repeated key: the last wins, as with encoding/json
		i = next
	}
}

// anyString decodes a JSON string (quotes included) as encoding/json does.
func anyString(q []byte) (string, bool) {
	if s, ok := plainString(q); ok {
		return s, true
	}
	var s string
	return s, json.Unmarshal(q, &s) == nil
}

// readProvenanceFast reads a provenance object as decodeNumbers does into a
// Provenance when its members are plain (each known key once, in its exact
// case, strings without escapes, details an object or null); ok is false
// otherwise.
func readProvenanceFast(v []byte) (*Provenance, bool) {
	var p Provenance
	var seen [4]bool
	ok := jsonstr.Members(v, func(key, val []byte) bool {
		var i int
		switch string(key) {
		case "source_protocol":
			i = 0
		case "converter":
			i = 1
		case "converted_at":
			i = 2
		case "details":
			i = 3
		default:
			// encoding/json matches struct fields without regard to case.
			for _, name := range [...]string{"source_protocol", "converter", "converted_at", "details"} {
				if strings.EqualFold(string(key), name) {
					return false
				}
			}
			return true
		}
		if seen[i] {
			return false
		}
		seen[i] = true
		if i == 3 {
			if isNull(val) {
				return true
			}
			m, ok := readObjectFast(val)
			p.Details = m
			return ok
		}
		s, ok := plainString(val)
		switch i {
		case 0:
			p.SourceProtocol = s
		case 1:
			p.Converter = s
		case 2:
			p.ConvertedAt = s
		}
		return ok
	})
	if !ok {
		return nil, false
	}
	return &p, true
}
