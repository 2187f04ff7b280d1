package e2a

import (
	"bytes"
	"encoding/json"
	"strconv"
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

// keyIndex returns the index of key in names, or -1; folded reports a key
// that is none of names but matches one without regard to case, as
// encoding/json matches the fields of a struct.
func keyIndex(names []string, key []byte) (i int, folded bool) {
	for i, name := range names {
		if string(key) == name {
			return i, false
		}
	}
	for _, name := range names {
		if strings.EqualFold(string(key), name) {
			return -1, true
		}
	}
	return -1, false
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
	var raw rawMembers
	var seen uint64
	// Validated as it is scanned: invalid JSON takes the general path too.
	if !jsonstr.ValidMembers(data, func(key, val []byte) bool {
		// The envelope's members are map keys on the general path: exact.
		i, _ := keyIndex(envelopeKeys[:], key)
		if i < 0 {
			return true // not read, as on the general path
		}
		if seen&(1<<i) != 0 {
			return false // the general path keeps the last: leave it to it
		}
		seen |= 1 << i
		raw[i] = val
		return true
	}) {
		return nil, false, nil
	}
	// The envelope and its provenance in one allocation, their strings in
	// another.
	var fr fastReader
	var e *Envelope
	if raw[keyProvenance] != nil {
		both := new(struct {
			env  Envelope
			prov Provenance
		})
		e, fr.prov = &both.env, &both.prov
	} else {
		e = new(Envelope)
	}
	size := 0
	for i, v := range raw[:keyChannelID] {
		if stringMembers&(1<<i) != 0 && len(v) > 2 {
			size += len(v) - 2 // the quotes
		}
	}
	size += min(len(raw[keyProvenance]), maxProvenanceStrings)
	fr.strs.b.Grow(size)
	for i, v := range raw[:keyChannelID] {
		if v == nil {
			continue
		}
		if err := readEnvelopeField(e, envelopeKeys[i], v, &fr); err != nil {
			return nil, true, fieldError(envelopeKeys[i], err)
		}
	}
	if err := e.readCompat(raw.get); err != nil {
		return nil, true, err
	}
	return e, true, nil
}

// fastReader is what fromJSONFast lends readEnvelopeField: the arena of the
// envelope's strings, and the provenance allocated with the envelope.
type fastReader struct {
	strs strArena
	prov *Provenance
}

// arena is fr's string arena; nil (no arena) for a nil fr.
func (fr *fastReader) arena() *strArena {
	if fr == nil {
		return nil
	}
	return &fr.strs
}

// provenance is the provenance allocated with the envelope, once; nil
// (allocate one) after, or for a nil fr.
func (fr *fastReader) provenance() *Provenance {
	if fr == nil {
		return nil
	}
	p := fr.prov
	fr.prov = nil
	return p
}

// stringMembers has bit i set for envelopeKeys[i] read as a string (ids,
// names, times): the members whose length sizes the string arena.
var stringMembers = func() (m uint64) {
	for i, k := range envelopeKeys[:keyChannelID] {
		switch k {
		case "protocol_version", "request_id", "correlation_id", "task_id", "context_id", "session_id", "channel",
			"method", "message_id", "timestamp", "identity_origin", "user_id", "source_agent_id", "ext_method",
			"session_update_kind", "deadline":
			m |= 1 << i
		}
	}
	return m
}()

// keyProvenance is the index of "provenance" in envelopeKeys.
const keyProvenance = 16

// maxProvenanceStrings bounds what the provenance adds to the string arena
// (its value's length: its three strings and its details, which are not
// the arena's): the normalizer's are 70 bytes or so (a converted_at of 32,
// a converter of 28); longer ones are allocated on their own.
const maxProvenanceStrings = 96

// readObjectFast reads a free-form object as DecodeStrict does into a
// map[string]any, from valid JSON; ok is false for a value that is not an
// object (DecodeStrict then gives its error).
func readObjectFast(v []byte) (map[string]any, bool) { return objectFast(v, false) }

// objectFast is readObjectFast; floats reads numbers as json.Unmarshal
// does into an any (float64) instead of as json.Number.
func objectFast(v []byte, floats bool) (map[string]any, bool) {
	i := jsonstr.SkipSpace(v, 0)
	if i >= len(v) || v[i] != '{' {
		return nil, false
	}
	m, _, ok := jsonstr.Object(v, i, floats)
	return m, ok
}

// provenanceFast reads a provenance object as DecodeStrict does into a
// Provenance when its members are plain (each known key once, in its exact
// case, strings without escapes, details an object or null), numbers in
// details as floats says (see objectFast); ok is false otherwise. It reads
// into into when it is not nil (zero; written to even when ok is false),
// and cuts its strings from a when it has room (a may be nil).
func provenanceFast(v []byte, floats bool, into *Provenance, a *strArena) (*Provenance, bool) {
	p := into
	if p == nil {
		p = new(Provenance)
	}
	var seen [len(provenanceKeys)]bool
	ok := jsonstr.Members(v, func(key, val []byte) bool {
		i, folded := keyIndex(provenanceKeys[:], key)
		if folded {
			return false
		}
		if i < 0 {
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
			m, ok := objectFast(val, floats)
			p.Details = m
			return ok
		}
		s, ok := a.plain(val)
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
	return p, true
}

// provenanceKeys are the members of a Provenance, in the order of its fields.
var provenanceKeys = [...]string{"source_protocol", "converter", "converted_at", "details"}

// responseKeys are the members of a Response, in the order of its fields.
var responseKeys = [...]string{
	"protocol_version", "response_id", "request_id", "sequence", "is_final", "status", "response_kind", "timestamp",
	"provenance", "body", "jsonrpc_id", "correlation_id", "task_id", "context_id", "session_id", "message_id",
	"is_stream", "identity_origin", "channel", "user_id", "source_agent_id", "method", "metadata", "projections",
	"channel_context", "a2a_metadata", "acp_meta",
}

// UnmarshalResponse decodes data into a new Response as json.Unmarshal
// does, with the same values and errors. A frame written plainly (each
// member once, with its exact name, no null, strings without escapes) is
// read by a scan of its members; any other input by json.Unmarshal
// (FuzzUnmarshalResponse compares both).
func UnmarshalResponse(data []byte) (*Response, error) {
	r := new(Response)
	if fastRead && r.scan(data) {
		return r, nil
	}
	*r = Response{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, err
	}
	return r, nil
}

// scan reads a plainly written frame into r (zero), validating it in the
// same pass; false (invalid JSON too) leaves the frame to json.Unmarshal.
func (r *Response) scan(data []byte) bool {
	var seen uint32
	return jsonstr.ValidMembers(data, func(key, val []byte) bool {
		i, folded := keyIndex(responseKeys[:], key)
		if folded {
			return false
		}
		if i < 0 {
			return true
		}
		if seen&(1<<i) != 0 || bytes.Equal(val, []byte("null")) {
			return false
		}
		seen |= 1 << i
		var s *string
		switch key := responseKeys[i]; key {
		case "sequence":
			n, err := strconv.ParseInt(string(val), 10, 64)
			r.Sequence = n
			return err == nil && (val[0] == '-' || (val[0] >= '0' && val[0] <= '9'))
		case "is_final", "is_stream":
			b := string(val) == "true"
			if !b && string(val) != "false" {
				return false
			}
			if key == "is_final" {
				r.IsFinal = b
			} else {
				r.IsStream = b
			}
			return true
		case "provenance":
			p, ok := provenanceFast(val, true, nil, nil)
			if ok {
				r.Provenance = *p
			}
			return ok
		case "body":
			r.Body = bytes.Clone(val)
			return true
		case "jsonrpc_id":
			r.JSONRPCID = bytes.Clone(val)
			return true
		case "metadata", "projections", "channel_context", "a2a_metadata", "acp_meta":
			m, ok := objectFast(val, true)
			switch key {
			case "metadata":
				r.Metadata = m
			case "projections":
				r.Projections = m
			case "channel_context":
				r.ChannelContext = m
			case "a2a_metadata":
				r.A2AMetadata = m
			default:
				r.ACPMeta = m
			}
			return ok
		case "protocol_version":
			s = &r.ProtocolVersion
		case "response_id":
			s = &r.ResponseID
		case "request_id":
			s = &r.RequestID
		case "status":
			s = &r.Status
		case "response_kind":
			s = &r.ResponseKind
		case "timestamp":
			s = &r.Timestamp
		case "correlation_id":
			s = &r.CorrelationID
		case "task_id":
			s = &r.TaskID
		case "context_id":
			s = &r.ContextID
		case "session_id":
			s = &r.SessionID
		case "message_id":
			s = &r.MessageID
		case "identity_origin":
			s = &r.IdentityOrigin
		case "channel":
			s = &r.Channel
		case "user_id":
			s = &r.UserID
		case "source_agent_id":
			s = &r.SourceAgentID
		case "method":
			s = &r.Method
		}
		v, ok := plainString(val)
		*s = v
		return ok
	})
}

// completeKeys are the members of a CompleteBody.
var completeKeys = [...]string{"result"}

// completeFast reads an e2a.complete body as DecodeStrict does into a
// CompleteBody, without a json.Decoder, when it is plain: valid JSON, an
// object whose "result" appears at most once and with its exact name (the
// other members ignored, as encoding/json ignores them); ok is false
// otherwise (FuzzComplete compares both).
func completeFast(body []byte) (CompleteBody, bool) {
	var b CompleteBody
	if !jsonstr.Valid(body) {
		return b, false
	}
	seen := false
	ok := jsonstr.Members(body, func(key, val []byte) bool {
		i, folded := keyIndex(completeKeys[:], key)
		if folded || (i == 0 && seen) {
			return false
		}
		if i < 0 {
			return true
		}
		seen = true
		v, end, ok := jsonstr.Value(val, 0, false)
		b.Result = v
		return ok && end == len(val)
	})
	return b, ok
}
