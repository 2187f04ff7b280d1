package normalizer

import (
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
)

// fastParams enables readA2ASendFast; the differential test turns it off.
var fastParams = true

// readA2ASendFast reads message/send and message/stream params as
// e2a.DecodeStrict does into p, without a json.Decoder and its reflection,
// when they are written plainly: valid JSON, each known member at most
// once with its exact name, values of the field's own JSON type (no null),
// and a configuration holding only acceptedOutputModes, blocking and an
// integer historyLength. ok is false for any other input, which
// decodeParams reads on its general path (its answer is the same:
// TestA2ASendFastMatches, FuzzA2ASendFast). p is only written when ok.
func readA2ASendFast(params []byte, p *a2aSendParamsWire) (ok bool) {
	if !fastParams || len(params) == 0 || params[0] != '{' {
		return false
	}
	var out a2aSendParamsWire
	var seen [3]bool
	// Validated as it is scanned (each value before fn reads it).
	if !jsonstr.ValidMembers(params, func(key, val []byte) bool {
		i, keep := pick(seen[:], key, "message", "configuration", "metadata")
		if i < 0 {
			return keep
		}
		switch i {
		case 0:
			out.Message = new(a2aMessageWire)
			return readA2AMessageFast(val, out.Message)
		case 1:
			out.Config = new(a2a.MessageSendConfig)
			return readSendConfigFast(val, out.Config)
		default:
			return readObject(val, &out.Metadata)
		}
	}) {
		return false
	}
	*p = out
	return true
}

func readA2AMessageFast(data []byte, m *a2aMessageWire) bool {
	var seen [9]bool
	return jsonstr.Members(data, func(key, val []byte) bool {
		i, keep := pick(seen[:], key, "kind", "messageId", "contextId", "taskId", "role", "parts", "metadata", "extensions", "referenceTaskIds")
		if i < 0 {
			return keep
		}
		switch i {
		case 0:
			return readString(val, &m.Kind)
		case 1:
			return readString(val, &m.ID)
		case 2:
			return readString(val, &m.ContextID)
		case 3:
			return readString(val, (*string)(&m.TaskID))
		case 4:
			return readString(val, (*string)(&m.Role))
		case 5:
			if val[0] != '[' {
				return false
			}
			v, _, ok := jsonstr.Value(val, 0, false)
			if ok {
				m.Parts, ok = v.([]any)
			}
			return ok
		case 6:
			return readObject(val, &m.Metadata)
		case 7:
			return readStrings(val, &m.Extensions)
		default:
			var ids []string
			if !readStrings(val, &ids) {
				return false
			}
			m.ReferenceTasks = make([]a2a.TaskID, len(ids))
			for j, id := range ids {
				m.ReferenceTasks[j] = a2a.TaskID(id)
			}
			return true
		}
	})
}

func readSendConfigFast(data []byte, c *a2a.MessageSendConfig) bool {
	var seen [3]bool
	return jsonstr.Members(data, func(key, val []byte) bool {
		i, _ := pick(seen[:], key, "acceptedOutputModes", "blocking", "historyLength")
		if i < 0 {
			// Any other member (pushNotificationConfig among them): the
			// general path.
			return false
		}
		switch i {
		case 0:
			return readStrings(val, &c.AcceptedOutputModes)
		case 1:
			switch string(val) {
			case "true", "false":
				b := val[0] == 't'
				c.Blocking = &b
				return true
			}
			return false
		default:
			// An integer as encoding/json reads one into an int: digits
			// only (no fraction or exponent), within int's range.
			s := string(val)
			if strings.ContainsAny(s, ".eE") {
				return false
			}
			n, err := strconv.Atoi(s)
			if err != nil {
				return false
			}
			c.HistoryLength = &n
			return true
		}
	})
}

// pick finds a member's key among names for a jsonstr.Members callback:
// its index, marked seen, when it is one of them, written for the first
// time; otherwise -1, and keep says whether the scan goes on (a member
// none of names, which encoding/json ignores) or the input is left to the
// general path (a repeated member, which encoding/json merges, or one that
// matches a name only without regard to case, which it takes for that
// field).
func pick(seen []bool, key []byte, names ...string) (i int, keep bool) {
	for i, name := range names {
		if string(key) == name {
			if seen[i] {
				return -1, false
			}
			seen[i] = true
			return i, true
		}
	}
	for _, name := range names {
		if strings.EqualFold(string(key), name) {
			return -1, false
		}
	}
	return -1, true
}

func readString(val []byte, dst *string) bool {
	if val[0] != '"' {
		return false
	}
	s, ok := jsonstr.String(val)
	*dst = s
	return ok
}

func readObject(val []byte, dst *map[string]any) bool {
	if val[0] != '{' {
		return false
	}
	m, _, ok := jsonstr.Object(val, 0, false)
	*dst = m
	return ok
}

func readStrings(val []byte, dst *[]string) bool {
	if val[0] != '[' {
		return false
	}
	v, _, ok := jsonstr.Value(val, 0, false)
	if !ok {
		return false
	}
	arr := v.([]any)
	out := make([]string, len(arr))
	for i, x := range arr {
		s, ok := x.(string)
		if !ok {
			return false
		}
		out[i] = s
	}
	*dst = out
	return true
}
