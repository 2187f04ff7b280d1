package openai

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
)

// decodeChunk decodes one event's data into c (zeroed first) exactly as
// json.Unmarshal does. The common chunk (id, object, model, created,
// choices with a text or reasoning delta and a finish reason, usage) is
// read by a scan without reflection (readChunk); anything else it does
// not handle exactly as encoding/json would (tool calls, a member name
// differing from a field's only in case, a repeated member, a value of
// another type, escapes in a name) goes to json.Unmarshal. The reflective
// decoding was a third of the bridge's own CPU per request (ten chunks of
// a short answer); FuzzDecodeChunk compares both.
//
// The strings of reuse (the completion's id and model, read from its
// chunks before) stand for members that equal them, so that the ten
// chunks of an answer do not each allocate them again; the array of the
// choices c held (nothing keeps them: turn.chunk decodes every chunk into
// the same c) holds the new ones.
func decodeChunk(data []byte, c *chunk, reuse ...string) error {
	spare := c.Choices[:0]
	*c = chunk{}
	if readChunk(data, c, spare, reuse) {
		return nil
	}
	*c = chunk{}
	return json.Unmarshal(data, c)
}

// readChunk is decodeChunk's fast path: false when data is anything it
// does not read as encoding/json would (c is then partly written). The
// choices are read into spare's array when it has room.
func readChunk(data []byte, c *chunk, spare []choice, reuse []string) bool {
	var seen uint8
	return jsonstr.ValidMembers(data, func(key, val []byte) bool {
		switch string(key) {
		case "id":
			return once(&seen, 1) && readString(val, &c.ID, reuse...)
		case "object":
			return once(&seen, 2) && readString(val, &c.Object, objectChunk)
		case "model":
			return once(&seen, 4) && readString(val, &c.Model, reuse...)
		case "choices":
			return once(&seen, 8) && readChoices(val, &c.Choices, spare)
		case "usage":
			return once(&seen, 16) && readRaw(val, &c.Usage)
		case "error":
			return once(&seen, 32) && readRaw(val, &c.Error)
		}
		return !foldsTo(key, "id", "object", "model", "choices", "usage", "error")
	})
}

// once sets bit in seen, false when it was set: a repeated member is left
// to encoding/json.
func once(seen *uint8, bit uint8) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// foldsTo reports a member name that encoding/json would match to one of
// names though it differs (it matches names without regard to case).
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if len(key) == len(n) && strings.EqualFold(string(key), n) {
			return true
		}
	}
	// Case folding maps some non-ASCII letters to ASCII (the Kelvin sign
	// to k, the long s to s): leave any name with such bytes to it.
	for _, b := range key {
		if b >= 0x80 {
			return true
		}
	}
	return false
}

func isNull(val []byte) bool { return string(val) == "null" }

// objectChunk is a chunk's object.
const objectChunk = "chat.completion.chunk"

// readString reads a string member into dst (null leaves it unchanged);
// a string without escapes equal to one of reuse is that string.
func readString(val []byte, dst *string, reuse ...string) bool {
	if isNull(val) {
		return true
	}
	if len(val) == 0 || val[0] != '"' {
		return false
	}
	if in, ok := jsonstr.Plain(val); ok {
		for _, r := range reuse {
			if string(in) == r {
				*dst = r
				return true
			}
		}
	}
	s, ok := jsonstr.String(val)
	*dst = s
	return ok
}

// readStringPtr reads a string member into a new string (null: nil).
func readStringPtr(val []byte, dst **string) bool {
	if isNull(val) {
		*dst = nil
		return true
	}
	var s string
	if !readString(val, &s) {
		return false
	}
	*dst = &s
	return true
}

// rawNull is the json.RawMessage of a null member, shared: nothing
// writes into a chunk's raw members.
var rawNull = json.RawMessage("null")

// readRaw copies a member's bytes, as json.RawMessage does (null too).
func readRaw(val []byte, dst *json.RawMessage) bool {
	if isNull(val) {
		*dst = rawNull[:4:4]
		return true
	}
	*dst = append(json.RawMessage(nil), val...)
	return true
}

// readChoices reads the choices array (null: nil, as encoding/json), into
// spare's array when it has room.
func readChoices(val []byte, dst *[]choice, spare []choice) bool {
	if isNull(val) {
		*dst = nil
		return true
	}
	if len(val) == 0 || val[0] != '[' {
		return false
	}
	out := spare[:0]
	if cap(out) == 0 {
		out = make([]choice, 0, 1)
	}
	i := jsonstr.SkipSpace(val, 1)
	for i < len(val) && val[i] != ']' {
		end := jsonstr.SkipValue(val, i)
		// Read in place: its content delta is kept in its own spare.
		out = append(out, choice{})
		if end <= i || !readChoice(val[i:end], &out[len(out)-1]) {
			return false
		}
		i = jsonstr.SkipSpace(val, end)
		if i < len(val) && val[i] == ',' {
			i = jsonstr.SkipSpace(val, i+1)
		}
	}
	*dst = out
	return true
}

// readChoice reads one choice (an object: val is valid JSON).
func readChoice(val []byte, ch *choice) bool {
	if len(val) == 0 || val[0] != '{' {
		return false
	}
	var seen uint8
	return jsonstr.Members(val, func(key, v []byte) bool {
		switch string(key) {
		case "index":
			return once(&seen, 1) && readInt(v, &ch.Index)
		case "delta":
			return once(&seen, 2) && readDelta(v, &ch.Delta, &ch.content)
		case "finish_reason":
			return once(&seen, 4) && readStringPtr(v, &ch.FinishReason)
		case "message":
			return isNull(v) && once(&seen, 8) // a message is left to encoding/json
		}
		return !foldsTo(key, "index", "delta", "finish_reason", "message")
	})
}

// readInt reads an integer member (null leaves dst unchanged); a number
// with a fraction or exponent, or out of range, or another type, is left
// to encoding/json (val is valid JSON: no sign but '-', no leading zero).
func readInt(val []byte, dst *int) bool {
	if isNull(val) {
		return true
	}
	n, err := strconv.Atoi(string(val))
	if err != nil {
		return false
	}
	*dst = n
	return true
}

// readDelta reads a delta without tool calls (a delta with any is left to
// encoding/json).
func readDelta(val []byte, d *delta, spare *contentField) bool {
	if isNull(val) {
		return true
	}
	if len(val) == 0 || val[0] != '{' {
		return false
	}
	var seen uint8
	return jsonstr.Members(val, func(key, v []byte) bool {
		switch string(key) {
		case "content":
			return once(&seen, 1) && readContentPtr(v, &d.Content, spare)
		case "refusal":
			return once(&seen, 2) && readTextPtr(v, &d.Refusal)
		case "reasoning_content":
			return once(&seen, 4) && readRaw(v, &d.ReasoningContent)
		case "reasoning":
			return once(&seen, 8) && readRaw(v, &d.Reasoning)
		case "tool_calls":
			return isNull(v) && once(&seen, 16)
		}
		return !foldsTo(key, "content", "refusal", "reasoning_content", "reasoning", "tool_calls")
	})
}
