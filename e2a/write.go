package e2a

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
)

// fastWrite enables appendEnvelope; the differential test turns it off.
var fastWrite = true

// maxWriteDepth bounds the nesting appendEnvelope writes itself; deeper
// values (and cyclic maps, which encoding/json refuses) go to json.Marshal.
const maxWriteDepth = 64

// MarshalEnvelope returns exactly what json.Marshal(env) returns: the same
// bytes, or an error where json.Marshal gives one. An envelope of the
// pipeline's own values (strings, json.Number, float64, bool, nil,
// map[string]any, []any, []string and map[string]string) is written
// directly, without reflection or sorting through encoding/json; any other
// value sends the whole envelope to json.Marshal. Ingress writes every
// envelope it publishes with it.
func MarshalEnvelope(env *Envelope) ([]byte, error) {
	if env != nil && fastWrite {
		if b, ok := appendEnvelope(make([]byte, 0, 1024), env); ok {
			return b, nil
		}
	}
	return json.Marshal(env)
}

// writer appends JSON; ok turns false at the first value it does not write
// exactly as encoding/json does, and the caller falls back.
type writer struct {
	b   []byte
	ok  bool
	sep bool // a member was written in the current object
}

func (w *writer) key(k string) {
	if w.sep {
		w.b = append(w.b, ',')
	}
	w.sep = true
	w.b = jsonstr.Append(w.b, k)
	w.b = append(w.b, ':')
}

func (w *writer) str(k, v string) {
	if v != "" {
		w.key(k)
		w.b = jsonstr.Append(w.b, v)
	}
}

// flag writes the member k true when v is (false is omitted, as
// omitempty does).
func (w *writer) flag(k string, v bool) {
	if v {
		w.key(k)
		w.b = append(w.b, "true"...)
	}
}

// open starts the object member k; close ends it.
func (w *writer) open(k string) {
	w.key(k)
	w.b, w.sep = append(w.b, '{'), false
}

func (w *writer) close() { w.b, w.sep = append(w.b, '}'), true }

// end closes the top-level object: the bytes written, or false when a
// value was left to json.Marshal.
func (w *writer) end() ([]byte, bool) {
	if !w.ok {
		return nil, false
	}
	return append(w.b, '}'), true
}

func (w *writer) object(k string, m map[string]any, depth int) {
	if len(m) > 0 {
		w.key(k)
		w.mapValue(m, depth)
	}
}

// appendEnvelope writes env as json.Marshal does (fields in struct order,
// omitempty honoured); ok is false when it met a value it leaves to
// json.Marshal.
func appendEnvelope(dst []byte, env *Envelope) ([]byte, bool) {
	w := &writer{b: append(dst, '{'), ok: true}
	w.str("protocol_version", env.ProtocolVersion)
	w.str("request_id", env.RequestID)
	if len(env.JSONRPCID) > 0 {
		if !plainRaw(env.JSONRPCID) {
			return nil, false
		}
		w.key("jsonrpc_id")
		w.b = append(w.b, env.JSONRPCID...)
	}
	w.str("correlation_id", env.CorrelationID)
	w.str("task_id", env.TaskID)
	w.str("context_id", env.ContextID)
	w.str("session_id", env.SessionID)
	w.str("channel", env.Channel)
	w.str("method", env.Method)
	w.str("message_id", env.MessageID)
	w.flag("is_stream", env.IsStream)
	w.str("timestamp", env.Timestamp)
	w.str("identity_origin", env.IdentityOrigin)
	w.str("user_id", env.UserID)
	w.str("source_agent_id", env.SourceAgentID)
	w.object("params", env.Params, 1)
	if p := env.Provenance; p != nil {
		w.provenance(p)
	}
	w.str("ext_method", env.ExtMethod)
	w.str("session_update_kind", env.SessionUpdateKind)
	if len(env.ExpectedOutputModes) > 0 {
		w.key("expected_output_modes")
		w.strings(env.ExpectedOutputModes)
	}
	if a := env.Auth; a != nil {
		w.open("auth")
		w.str("method_id", a.MethodID)
		w.str("bearer_token", a.BearerToken)
		w.str("api_key_ref", a.APIKeyRef)
		w.str("credential_ref", a.CredentialRef)
		if len(a.ExtraHeaders) > 0 {
			w.key("extra_headers")
			w.stringMap(a.ExtraHeaders)
		}
		w.object("_meta", a.Meta, 2)
		w.close()
	}
	w.object("channel_context", env.ChannelContext, 1)
	w.object("a2a_metadata", env.A2AMetadata, 1)
	w.object("acp_meta", env.ACPMeta, 1)
	w.str("deadline", env.Deadline)
	if t := env.Trace; t != nil {
		w.open("trace")
		w.str("traceparent", t.Traceparent)
		w.str("tracestate", t.Tracestate)
		w.close()
	}
	return w.end()
}

// provenance writes the provenance member.
func (w *writer) provenance(p *Provenance) {
	w.open("provenance")
	w.key("source_protocol")
	w.b = jsonstr.Append(w.b, p.SourceProtocol)
	w.str("converter", p.Converter)
	w.str("converted_at", p.ConvertedAt)
	w.object("details", p.Details, 2)
	w.close()
}

// raw writes the member k with the raw value v, json.Marshal's null for
// nil; a value json.Marshal would compact, escape or refuse turns ok false.
func (w *writer) raw(k string, v json.RawMessage) {
	if v == nil {
		w.key(k)
		w.b = append(w.b, "null"...)
		return
	}
	if !plainRaw(v) {
		w.ok = false
		return
	}
	w.key(k)
	w.b = append(w.b, v...)
}

// MarshalResponse returns exactly what json.Marshal(r) returns, as
// MarshalEnvelope does for an envelope: a response of the pipeline's own
// values is written directly, any other goes to json.Marshal whole. The
// agent's writer encodes each request's frame template with it.
func MarshalResponse(r *Response) ([]byte, error) {
	if r != nil && fastWrite {
		if b, ok := appendResponse(make([]byte, 0, 512+len(r.Body)), r); ok {
			return b, nil
		}
	}
	return json.Marshal(r)
}

// appendResponse writes r as json.Marshal does; ok is false when it met a
// value it leaves to json.Marshal.
func appendResponse(dst []byte, r *Response) ([]byte, bool) {
	w := &writer{b: append(dst, '{'), ok: true}
	for _, m := range [...]struct{ k, v string }{{"protocol_version", r.ProtocolVersion}, {"response_id", r.ResponseID}, {"request_id", r.RequestID}} {
		w.key(m.k)
		w.b = jsonstr.Append(w.b, m.v)
	}
	w.key("sequence")
	w.b = strconv.AppendInt(w.b, r.Sequence, 10)
	w.key("is_final")
	w.b = strconv.AppendBool(w.b, r.IsFinal)
	for _, m := range [...]struct{ k, v string }{{"status", r.Status}, {"response_kind", r.ResponseKind}, {"timestamp", r.Timestamp}} {
		w.key(m.k)
		w.b = jsonstr.Append(w.b, m.v)
	}
	w.provenance(&r.Provenance)
	w.raw("body", r.Body)
	if len(r.JSONRPCID) > 0 {
		w.raw("jsonrpc_id", r.JSONRPCID)
	}
	w.str("correlation_id", r.CorrelationID)
	w.str("task_id", r.TaskID)
	w.str("context_id", r.ContextID)
	w.str("session_id", r.SessionID)
	w.str("message_id", r.MessageID)
	w.flag("is_stream", r.IsStream)
	w.str("identity_origin", r.IdentityOrigin)
	w.str("channel", r.Channel)
	w.str("user_id", r.UserID)
	w.str("source_agent_id", r.SourceAgentID)
	w.str("method", r.Method)
	w.object("metadata", r.Metadata, 1)
	w.object("projections", r.Projections, 1)
	w.object("channel_context", r.ChannelContext, 1)
	w.object("a2a_metadata", r.A2AMetadata, 1)
	w.object("acp_meta", r.ACPMeta, 1)
	return w.end()
}

// plainRaw reports a raw value json.Marshal copies unchanged: valid, with
// no white space to compact and nothing its HTML escaping would rewrite
// (<, >, & and the bytes that start U+2028 and U+2029).
func plainRaw(v []byte) bool {
	for _, c := range v {
		switch c {
		case ' ', '\t', '\r', '\n', '<', '>', '&', 0xe2:
			return false
		}
	}
	return jsonstr.Valid(v)
}

// value writes v, a member of an object or array at the given depth.
func (w *writer) value(v any, depth int) {
	if !w.ok {
		return
	}
	switch t := v.(type) {
	case nil:
		w.b = append(w.b, "null"...)
	case string:
		w.b = jsonstr.Append(w.b, t)
	case bool:
		w.b = strconv.AppendBool(w.b, t)
	case float64:
		w.float(t)
	case json.Number:
		w.number(t)
	case map[string]any:
		if t == nil {
			w.b = append(w.b, "null"...)
			return
		}
		w.mapValue(t, depth)
	case []any:
		if t == nil {
			w.b = append(w.b, "null"...)
			return
		}
		if depth >= maxWriteDepth {
			w.ok = false
			return
		}
		writeArray(w, t, func(e any) { w.value(e, depth+1) })
	case []string:
		if t == nil {
			w.b = append(w.b, "null"...)
			return
		}
		w.strings(t)
	case map[string]string:
		if t == nil {
			w.b = append(w.b, "null"...)
			return
		}
		w.stringMap(t)
	default:
		w.ok = false
	}
}

// mapValue writes m with its keys sorted, as encoding/json does.
func (w *writer) mapValue(m map[string]any, depth int) {
	if depth >= maxWriteDepth {
		w.ok = false
		return
	}
	writeSorted(w, m, func(v any) { w.value(v, depth+1) })
}

func (w *writer) stringMap(m map[string]string) {
	writeSorted(w, m, func(v string) { w.b = jsonstr.Append(w.b, v) })
}

// writeSorted writes m as an object with its keys sorted, each value by put.
func writeSorted[V any](w *writer, m map[string]V, put func(V)) {
	var arr [16]string
	keys := arr[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.b = append(w.b, '{')
	for i, k := range keys {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = jsonstr.Append(w.b, k)
		w.b = append(w.b, ':')
		put(m[k])
	}
	w.b = append(w.b, '}')
}

func (w *writer) strings(s []string) {
	writeArray(w, s, func(e string) { w.b = jsonstr.Append(w.b, e) })
}

// writeArray writes s as an array, each element by put.
func writeArray[E any](w *writer, s []E, put func(E)) {
	w.b = append(w.b, '[')
	for i, e := range s {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		put(e)
	}
	w.b = append(w.b, ']')
}

// float writes f as encoding/json's float64 encoder does; NaN and the
// infinities, which it refuses, go to json.Marshal for its error.
func (w *writer) float(f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		w.ok = false
		return
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	w.b = strconv.AppendFloat(w.b, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9, as encoding/json writes it.
		if n := len(w.b); n >= 4 && w.b[n-4] == 'e' && w.b[n-3] == '-' && w.b[n-2] == '0' {
			w.b[n-2] = w.b[n-1]
			w.b = w.b[:n-1]
		}
	}
}

// number writes a json.Number as encoding/json does: "" as 0, a valid
// number as it is; an invalid one goes to json.Marshal for its error.
func (w *writer) number(n json.Number) {
	if n == "" {
		w.b = append(w.b, '0')
		return
	}
	if c := n[0]; (c != '-' && (c < '0' || c > '9')) || !plainRaw([]byte(n)) {
		w.ok = false
		return
	}
	w.b = append(w.b, n...)
}
