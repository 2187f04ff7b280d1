package e2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
)

// MaxNesting is the deepest JSON nesting [FromJSON] and [ResponseFromJSON]
// accept; deeper input is refused with ErrInvalidJSON before decoding.
const MaxNesting = 128

// FromJSON reads an envelope, applying every compatibility rule of spec §9
// and the AgentRequest mapping of §10:
//
//   - channel_id → channel, req_method → method (the new names win);
//   - metadata → channel_context, only when channel_context is empty;
//   - binding → provenance.details.migrated_from_binding;
//   - a top-level legacy payload object is merged into params without
//     overwriting existing keys;
//   - a float or integer epoch timestamp becomes an RFC 3339 UTC string;
//   - jsonrpc_id null is treated as absent.
//
// Numbers inside params and other free-form objects are kept as json.Number.
// It returns an error wrapping ErrInvalidJSON when data is not a JSON object
// (or nests deeper than MaxNesting), and ErrInvalidEnvelope when a known field
// has a JSON type §4 does not allow (a number request_id included: it is
// never converted) or a timestamp or deadline has second 60 where no leap
// second can be (see [ParseTime]).
func FromJSON(data []byte) (*Envelope, error) {
	if err := checkDepth(data, MaxNesting); err != nil {
		return nil, err
	}
	if fastRead {
		if env, ok, err := fromJSONFast(data); ok {
			return env, err
		}
	}
	raw, err := rawObject(data)
	if err != nil {
		return nil, err
	}
	var env Envelope
	for key, v := range raw {
		if err := readEnvelopeField(&env, key, v, nil); err != nil {
			return nil, fieldError(key, err)
		}
	}
	if err := env.readCompat(func(i int) json.RawMessage { return raw[envelopeKeys[i]] }); err != nil {
		return nil, err
	}
	return &env, nil
}

// fieldError is the error of a known field of the wrong type, in JSON's
// words: a member of the wrong type inside the field is named by its path
// ("provenance.source_protocol") and the JSON types, never by the Go types
// of encoding/json's message ("cannot unmarshal number into Go struct
// field Provenance.source_protocol of type string"), which mean nothing to
// the client that sent the envelope.
func fieldError(key string, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Type != nil {
		if te.Field != "" {
			key += "." + te.Field
		}
		return fmt.Errorf("%w: field %q: must be %s, not %s", ErrInvalidEnvelope, key, jsonTypeOf(te.Type), sentKind(te.Value))
	}
	return fmt.Errorf("%w: field %q: %s", ErrInvalidEnvelope, key, strings.TrimPrefix(err.Error(), "json: "))
}

// jsonTypeOf names the JSON type that decodes into a value of type t.
func jsonTypeOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	}
	return "another JSON type"
}

// sentKind names the JSON value an UnmarshalTypeError describes ("array",
// "number -5", "bool") as a client reads it.
func sentKind(v string) string {
	switch {
	case v == "bool":
		return "a boolean"
	case v == "array", v == "object":
		return "an " + v
	case strings.HasPrefix(v, "number "):
		return "the number " + v[len("number "):]
	}
	return "a " + v
}

// readCompat applies the compatibility keys to env once its fields are read;
// get returns the raw value of envelopeKeys[i] (nil when absent).
func (env *Envelope) readCompat(get func(int) json.RawMessage) error {
	// Compatibility keys: the new name wins when both are present.
	if env.Channel == "" {
		if err := readString(get(keyChannelID), &env.Channel, nil); err != nil {
			return fieldError("channel_id", err)
		}
	}
	if env.Method == "" {
		if err := readString(get(keyReqMethod), &env.Method, nil); err != nil {
			return fieldError("req_method", err)
		}
	}
	if len(env.ChannelContext) == 0 {
		if v := get(keyMetadata); v != nil && !isNull(v) {
			var m map[string]any
			if err := DecodeStrict(v, &m); err != nil {
				return fieldError("metadata", err)
			}
			if len(m) > 0 {
				env.ChannelContext = m
			}
		}
	}
	if v := get(keyBinding); v != nil && !isNull(v) {
		// The binding moves two levels deeper (provenance.details); refuse
		// one that would then nest deeper than MaxNesting, so that every
		// envelope FromJSON accepts also reads back once written.
		if err := checkDepth(v, MaxNesting-3); err != nil {
			return fmt.Errorf("%w: field \"binding\": %v", ErrInvalidEnvelope, err)
		}
		var b any
		if err := DecodeStrict(v, &b); err != nil {
			return fmt.Errorf("%w: field \"binding\": %v", ErrInvalidEnvelope, err)
		}
		if env.Provenance == nil {
			env.Provenance = &Provenance{SourceProtocol: SourceE2A}
		}
		if env.Provenance.Details == nil {
			env.Provenance.Details = map[string]any{}
		}
		env.Provenance.Details["migrated_from_binding"] = b
	}
	if v := get(keyPayload); v != nil && !isNull(v) {
		var p map[string]any
		if err := DecodeStrict(v, &p); err != nil {
			return fieldError("payload", err)
		}
		if len(p) > 0 && env.Params == nil {
			env.Params = make(map[string]any, len(p))
		}
		for k, val := range p {
			if _, exists := env.Params[k]; !exists {
				env.Params[k] = val
			}
		}
	}
	return nil
}

// readEnvelopeField reads the member key of an envelope into env; fr is
// fromJSONFast's (its strings' arena and the provenance allocated with
// env), nil on the general path.
func readEnvelopeField(env *Envelope, key string, v json.RawMessage, fr *fastReader) error {
	a := fr.arena()
	switch key {
	case "protocol_version":
		return readString(v, &env.ProtocolVersion, a)
	case "request_id":
		// string / null (§4.1); a number was read as its decimal text,
		// which the specification does not allow.
		return readString(v, &env.RequestID, a)
	case "jsonrpc_id":
		return readJSONRPCID(v, &env.JSONRPCID)
	case "correlation_id":
		return readString(v, &env.CorrelationID, a)
	case "task_id":
		return readString(v, &env.TaskID, a)
	case "context_id":
		return readString(v, &env.ContextID, a)
	case "session_id":
		return readString(v, &env.SessionID, a)
	case "channel":
		return readString(v, &env.Channel, a)
	case "method":
		return readString(v, &env.Method, a)
	case "message_id":
		return readString(v, &env.MessageID, a)
	case "is_stream":
		return readBool(v, &env.IsStream)
	case "timestamp":
		return readTimestamp(v, &env.Timestamp, a)
	case "identity_origin":
		return readString(v, &env.IdentityOrigin, a)
	case "user_id":
		return readString(v, &env.UserID, a)
	case "source_agent_id":
		return readString(v, &env.SourceAgentID, a)
	case "params":
		return readObject(v, &env.Params)
	case "provenance":
		if fastRead && !isNull(v) {
			if p, ok := provenanceFast(v, false, fr.provenance(), a); ok {
				env.Provenance = p
				return nil
			}
		}
		return readStruct(v, &env.Provenance)
	case "ext_method":
		return readString(v, &env.ExtMethod, a)
	case "session_update_kind":
		return readString(v, &env.SessionUpdateKind, a)
	case "expected_output_modes":
		return readStrings(v, &env.ExpectedOutputModes)
	case "auth":
		return readStruct(v, &env.Auth)
	case "channel_context":
		return readObject(v, &env.ChannelContext)
	case "a2a_metadata":
		return readObject(v, &env.A2AMetadata)
	case "acp_meta":
		return readObject(v, &env.ACPMeta)
	case "deadline":
		return readTimestamp(v, &env.Deadline, a)
	case "trace":
		if isNull(v) {
			return nil
		}
		var t TraceContext
		if err := json.Unmarshal(v, &t); err != nil {
			return err
		}
		if t != (TraceContext{}) {
			env.Trace = &t
		}
	}
	return nil
}

// rawObject decodes data, one JSON object, into its members. They stay
// raw (numbers included): plain Unmarshal reads them without the Decoder's
// copy of the whole input. It returns an error wrapping ErrInvalidJSON when
// data is not a JSON object.
func rawObject(data []byte) (map[string]json.RawMessage, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) { // valid JSON, of another type
			return nil, fmt.Errorf("%w: the body must be a JSON object, not %s", ErrInvalidJSON, sentKind(te.Value))
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalidJSON, err)
	}
	if raw == nil {
		return nil, fmt.Errorf("%w: the body must be a JSON object, not null", ErrInvalidJSON)
	}
	return raw, nil
}

// parseFloat is strconv.ParseFloat without the error value it allocates
// for text that cannot be a number: an RFC 3339 time has a colon, which no
// float syntax has; text starting unlike a float (digits, sign, point,
// "inf", "nan") is not parsed either.
func parseFloat(s string) (float64, error) {
	if s == "" || !strings.ContainsRune("+-.0123456789iInN", rune(s[0])) || strings.IndexByte(s, ':') >= 0 {
		return 0, errNotFloat
	}
	return strconv.ParseFloat(s, 64)
}

var errNotFloat = errors.New("not a number")

// U+2028 and U+2029, which json.Marshal escapes.
var lineSeps, paraSeps = []byte("\u2028"), []byte("\u2029")

func isNull(v json.RawMessage) bool {
	return len(v) == 0 || string(bytes.TrimSpace(v)) == "null"
}

// DecodeStrict decodes the one JSON value of data into v, the numbers of
// free-form values as json.Number (as the pipeline keeps them), and
// refuses anything but white space after it: how the envelope, the frames
// and the normalizer's protocol bodies are read.
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	// Only white space may follow the value (dec.More and dec.Token both
	// let a stray "]" or "}" through).
	if len(bytes.TrimSpace(data[dec.InputOffset():])) != 0 {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// readString reads a string member (§4: "string / null"); null leaves
// *dst unchanged. Any other JSON type is refused, never converted. A plain
// string is cut from a when it has room (a may be nil).
func readString(v json.RawMessage, dst *string, a *strArena) error {
	if isNull(v) {
		return nil
	}
	if s, ok := a.plain(v); ok {
		*dst = s
		return nil
	}
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '"' {
		return fmt.Errorf("must be a string or null, not %s", jsonKind(t))
	}
	return json.Unmarshal(v, dst)
}

// readStrings reads an array of strings (expected_output_modes); null
// leaves *dst unchanged. A null element is refused: json.Unmarshal would
// have read it as "".
func readStrings(v json.RawMessage, dst *[]string) error {
	if isNull(v) {
		return nil
	}
	var elems []json.RawMessage
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '[' || json.Unmarshal(t, &elems) != nil {
		return fmt.Errorf("must be an array of strings or null, not %s", jsonKind(t))
	}
	out := make([]string, len(elems))
	for i, e := range elems {
		if t := bytes.TrimSpace(e); len(t) == 0 || t[0] != '"' {
			return fmt.Errorf("element %d must be a string, not %s", i, jsonKind(t))
		}
		if err := json.Unmarshal(e, &out[i]); err != nil {
			return fmt.Errorf("element %d: %w", i, err)
		}
	}
	*dst = out
	return nil
}

// jsonKind names the JSON type of t, a valid JSON value without leading
// white space, for an error message.
func jsonKind(t []byte) string {
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// plainString reads a JSON string that needs no decoding (no escape, no
// control character, valid UTF-8) straight from its bytes, as
// json.Unmarshal would; ok is false for any other value, which the caller
// hands to json.Unmarshal. Most of an envelope's strings are plain.
func plainString(v []byte) (string, bool) { return (*strArena)(nil).plain(v) }

// strArena hands out the plain strings of one envelope from one
// allocation (an envelope has a dozen, each its own allocation else):
// fromJSONFast sizes it for the members it found. A string that does not
// fit is allocated on its own. The strings share their memory, which the
// arena's Builder never writes again: one kept keeps the others (a few
// hundred bytes of ids and times), never the input.
type strArena struct{ b strings.Builder }

// plain is plainString, its string cut from a when a (may be nil) has room.
func (a *strArena) plain(v []byte) (string, bool) {
	in, ok := jsonstr.Plain(bytes.TrimSpace(v))
	if !ok || len(in) == 0 || a == nil || a.b.Cap()-a.b.Len() < len(in) {
		return string(in), ok
	}
	n := a.b.Len()
	a.b.Write(in)
	return a.b.String()[n:], true
}

// readStruct reads an object member into a new T (its numbers as
// json.Number) set in *dst; null leaves *dst unchanged.
func readStruct[T any](v json.RawMessage, dst **T) error {
	if isNull(v) {
		return nil
	}
	var t T
	if err := DecodeStrict(v, &t); err != nil {
		return err
	}
	*dst = &t
	return nil
}

// readBool reads a boolean member (is_stream); null leaves *dst
// unchanged. A string or number ("true", 1) is refused, never converted.
func readBool(v json.RawMessage, dst *bool) error {
	if isNull(v) {
		return nil
	}
	switch t := bytes.TrimSpace(v); string(t) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return fmt.Errorf("must be true, false or null, not %s", jsonKind(t))
	}
	return nil
}

// readObject reads a free-form object member; v is valid JSON (a member
// FromJSON found), which readObjectFast requires.
func readObject(v json.RawMessage, dst *map[string]any) error {
	if isNull(v) {
		return nil
	}
	if fastRead {
		if m, ok := readObjectFast(v); ok {
			*dst = m
			return nil
		}
	}
	var m map[string]any
	if err := DecodeStrict(v, &m); err != nil {
		return err // fieldError words it
	}
	*dst = m
	return nil
}

// readJSONRPCID accepts a JSON-RPC id: string or number; null means absent.
func readJSONRPCID(v json.RawMessage, dst *json.RawMessage) error {
	if isNull(v) {
		*dst = nil
		return nil
	}
	id, err := CanonicalJSONRPCID(v)
	if err != nil {
		return err
	}
	*dst = id
	return nil
}

// CanonicalJSONRPCID checks that raw is a JSON-RPC id (a string or a number)
// and returns it in canonical form: a number keeps its exact text (so large
// integers survive), a string is re-encoded (escapes resolved, invalid UTF-8
// replaced by U+FFFD) so that the same id always has the same bytes. null
// and empty input give nil.
func CanonicalJSONRPCID(raw json.RawMessage) (json.RawMessage, error) {
	if isNull(raw) {
		return nil, nil
	}
	t := bytes.TrimSpace(raw)
	switch {
	case t[0] == '"':
		// A plain string without the characters json.Marshal escapes for
		// HTML is already canonical.
		if _, ok := plainString(t); ok && !bytes.ContainsAny(t, "<>&") && !bytes.Contains(t, lineSeps) && !bytes.Contains(t, paraSeps) {
			return bytes.Clone(t), nil
		}
		var s string
		if err := json.Unmarshal(t, &s); err != nil {
			return nil, err
		}
		return json.Marshal(s)
	case t[0] == '-' || (t[0] >= '0' && t[0] <= '9'):
		var n json.Number
		if err := json.Unmarshal(t, &n); err != nil {
			return nil, err
		}
		return json.RawMessage(n.String()), nil
	default:
		return nil, fmt.Errorf("must be a string, a number or null")
	}
}

// readTimestamp accepts an RFC 3339 string or epoch seconds as a number or
// numeric string, normalized to RFC 3339 UTC (spec §4.3; see
// [NormalizeTime]). A string that is neither is kept as written, for the
// caller to refuse, but for a leap second (second 60) where none can be,
// refused here: the caller's "not RFC 3339" would be wrong about its
// syntax, which RFC 3339 allows.
func readTimestamp(v json.RawMessage, dst *string, a *strArena) error {
	if isNull(v) {
		return nil
	}
	t := bytes.TrimSpace(v)
	if t[0] == '"' {
		s, ok := a.plain(t)
		if !ok {
			if err := json.Unmarshal(t, &s); err != nil {
				return err
			}
		}
		if f, err := parseFloat(strings.TrimSpace(s)); err == nil && s != "" {
			ts, err := EpochToRFC3339(f)
			if err != nil {
				return err
			}
			*dst = ts
			return nil
		}
		*dst = NormalizeTime(s)
		if isLeapSecond(s) {
			// Upper case: a lower-case t or z is the caller's to read.
			if _, err := ParseTime(strings.ToUpper(s)); errors.Is(err, errLeapSecond) {
				return err
			}
		}
		return nil
	}
	var f float64
	if err := json.Unmarshal(t, &f); err != nil {
		return fmt.Errorf("must be an RFC 3339 string or epoch seconds")
	}
	ts, err := EpochToRFC3339(f)
	if err != nil {
		return err
	}
	*dst = ts
	return nil
}

// EpochToRFC3339 converts epoch seconds (fractions kept to the microsecond)
// to an RFC 3339 UTC string in the form the specification uses,
// e.g. 2026-03-26T11:33:01.150000+00:00.
func EpochToRFC3339(sec float64) (string, error) {
	if math.IsNaN(sec) || math.IsInf(sec, 0) || sec < -62135596800 || sec > 253402300799 {
		return "", fmt.Errorf("epoch timestamp %v out of range", sec)
	}
	whole := math.Floor(sec)
	micros := int64(math.Round((sec - whole) * 1e6))
	t := time.Unix(int64(whole), micros*1000).UTC()
	return FormatTime(t), nil
}

// FormatTime writes t as RFC 3339 UTC with a +00:00 offset, microseconds
// when t has a fractional second (the form of Python's isoformat()).
func FormatTime(t time.Time) string {
	var b [TimeLen]byte
	return string(AppendTime(b[:0], t))
}

// TimeLen is the longest timestamp [FormatTime] writes.
const TimeLen = len("2006-01-02T15:04:05.000000+00:00")

// AppendTime appends t as [FormatTime] writes it (no allocation when dst
// has room). Every frame carries a timestamp: the digits are written here
// rather than by time.Time.AppendFormat, which interprets its layout on
// every call (in a CPU profile of the in-process bench, AppendFormat's
// timestamp was half of the agent's frame encoding); years outside
// 0..9999 take AppendFormat's path (FuzzAppendTime compares the two).
func AppendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return appendTimeLayout(dst, t)
	}
	hour, minute, sec := t.Clock()
	dst = appendDigits(dst, year, 4)
	dst = append(dst, '-')
	dst = appendDigits(dst, int(month), 2)
	dst = append(dst, '-')
	dst = appendDigits(dst, day, 2)
	dst = append(dst, 'T')
	dst = appendDigits(dst, hour, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, minute, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, sec, 2)
	if us := t.Nanosecond() / 1000; us != 0 {
		dst = append(dst, '.')
		dst = appendDigits(dst, us, 6)
	}
	return append(dst, "+00:00"...)
}

// appendTimeLayout is AppendTime through time.Time.AppendFormat.
func appendTimeLayout(dst []byte, t time.Time) []byte {
	t = t.UTC()
	if t.Nanosecond()/1000 == 0 {
		dst = t.AppendFormat(dst, "2006-01-02T15:04:05")
	} else {
		dst = t.AppendFormat(dst, "2006-01-02T15:04:05.000000")
	}
	return append(dst, "+00:00"...)
}

// appendDigits appends the n lowest decimal digits of v (0 <= v), zero
// padded.
func appendDigits(dst []byte, v, n int) []byte {
	var b [6]byte
	for i := n - 1; i >= 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, b[:n]...)
}

// NormalizeTime returns an RFC 3339 timestamp in UTC (spec §4.3): one
// already in UTC ("Z", "+00:00" or "-00:00") is kept as written; one with
// another offset is converted, e.g. 2026-03-28T14:00:00+02:00 becomes
// 2026-03-28T12:00:00+00:00 (the form of [FormatTime], nanoseconds kept).
// A leap second is written as the next second ([ParseTime]), whatever its
// offset: 2016-12-31T23:59:60Z becomes 2017-01-01T00:00:00+00:00, which
// every stage's parser reads (Go's and Python's refuse second 60).
// Anything that is not RFC 3339 is returned unchanged.
func NormalizeTime(s string) string {
	if isUTCTime(s) {
		// Every envelope the pipeline writes has its times so (the agent
		// reads one per request): no parse.
		return s
	}
	return normalizeParsed(s)
}

// normalizeParsed is NormalizeTime without its fast path for UTC times:
// s parsed.
func normalizeParsed(s string) string {
	t, err := ParseTime(s)
	if err != nil {
		return s
	}
	if _, off := t.Zone(); off == 0 && !isLeapSecond(s) {
		return s
	}
	t = t.UTC()
	if t.Nanosecond()%1000 != 0 {
		return t.Format("2006-01-02T15:04:05.000000000") + "+00:00"
	}
	return FormatTime(t)
}

// Now returns the current time formatted by [FormatTime].
func Now() string { return FormatTime(time.Now()) }

// ParseTime reads an RFC 3339 timestamp as written by [FormatTime] or any
// RFC 3339 form, a leap second included.
//
// RFC 3339 (§5.6, §5.7) allows second 60, a leap second, which Go's
// time.Parse refuses (time.Time has no 61st second). It is read as the
// next second, 2016-12-31T23:59:60.5Z as 2017-01-01T00:00:00.5Z, as Unix
// time, which has no leap seconds, counts it (C's timegm carries second 60
// into the next minute; PostgreSQL reads it so): refusing it would refuse
// a valid timestamp, and a deadline one second later than written is
// harmless. Second 60 is only accepted where a leap second can
// be, at 23:59 UTC (any offset, as RFC 3339 §5.8's 1990-12-31T15:59:60-08:00),
// and never past 9999-12-31T23:59:59Z (no RFC 3339 time follows it);
// elsewhere the error wraps a message that says so.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err == nil || !isLeapSecond(s) {
		return t, err
	}
	t, lerr := time.Parse(time.RFC3339Nano, s[:17]+"59"+s[19:])
	if lerr != nil {
		return time.Time{}, err // not RFC 3339 for another reason
	}
	if u := t.UTC(); u.Hour() != 23 || u.Minute() != 59 {
		return time.Time{}, fmt.Errorf("parsing time %q: second 60 (a %w) is only valid at 23:59:60 UTC", s, errLeapSecond)
	}
	next := t.Add(time.Second)
	if next.UTC().Year() > 9999 {
		return time.Time{}, fmt.Errorf("parsing time %q: the %w at the end of year 9999 has no next second in RFC 3339", s, errLeapSecond)
	}
	return next, nil
}

// errLeapSecond is wrapped by the errors of a second 60 where none can be.
var errLeapSecond = errors.New("leap second")

// isLeapSecond reports whether s, read as RFC 3339, has second 60: the
// digits after the second colon of its time ("2016-12-31T23:59:60Z").
func isLeapSecond(s string) bool {
	return len(s) > 19 && s[16] == ':' && s[17:19] == "60"
}

// checkDepth refuses JSON nested deeper than max without decoding it.
func checkDepth(data []byte, max int) error {
	if jsonstr.Deeper(data, max) {
		return fmt.Errorf("%w: nesting deeper than %d", ErrInvalidJSON, max)
	}
	return nil
}

// CheckDepth reports an error wrapping ErrInvalidJSON when data nests
// deeper than max. It does not validate the JSON otherwise.
func CheckDepth(data []byte, max int) error { return checkDepth(data, max) }

func toInt(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i, true
		}
		if f, err := n.Float64(); err == nil {
			return int64(f), true
		}
	case float64:
		return int64(n), true
	case int:
		return int64(n), true
	case int64:
		return n, true
	case string:
		if i, err := strconv.ParseInt(n, 10, 64); err == nil {
			return i, true
		}
	}
	return 0, false
}

// isUTCTime reports whether s is an RFC 3339 time in UTC ("Z", "+00:00"
// or "-00:00"), second 60 excluded, in the form time.Parse reads on its
// fast path (two-digit fields, "." and at least one digit before a
// fraction): the form the normalizer writes, which NormalizeTime keeps as
// written without parsing it (FuzzNormalizeTime compares the two). false
// leaves s to ParseTime.
func isUTCTime(s string) bool {
	n := len(s)
	switch {
	case n >= 20 && s[n-1] == 'Z':
		n--
	case n >= 25 && (s[n-6] == '+' || s[n-6] == '-') && s[n-5:] == "00:00":
		n -= 6
	default:
		return false
	}
	if s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return false
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	hour, ok4 := digits(s[11:13])
	minute, ok5 := digits(s[14:16])
	sec, ok6 := digits(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return false
	}
	if n == 19 {
		return true
	}
	// A fraction: "." and one digit or more, up to the zone.
	if n == 20 || s[19] != '.' {
		return false
	}
	_, ok := digits(s[20:n])
	return ok
}

// digits reads s, ASCII digits only, as a decimal number (v wraps for more
// than 18 digits; isUTCTime only checks a fraction's).
func digits(s string) (v int, ok bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// daysIn is the number of days of month (1..12) in year (proleptic
// Gregorian, as package time counts them).
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
