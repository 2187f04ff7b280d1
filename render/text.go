package render

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
	"unsafe"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
)

// fastText enables the text fast path ([ReadTextChunk], [ReadPlainText]);
// the differential test turns it off.
var fastText = true

// metaLLMResponseID is the metadata key of the LLM response a chunk is
// part of (A2A's artifacts are grouped by it).
const metaLLMResponseID = "llm_response_id"

// textFrame is what the text fast paths read of a frame: the fields of
// e2a.Response it needs, under the same names, so that encoding/json reads
// the same values from the same bytes.
type textFrame struct {
	ResponseID   string                     `json:"response_id"`
	RequestID    string                     `json:"request_id"`
	IsFinal      bool                       `json:"is_final"`
	ResponseKind string                     `json:"response_kind"`
	TaskID       string                     `json:"task_id"`
	ContextID    string                     `json:"context_id"`
	SessionID    string                     `json:"session_id"`
	Metadata     map[string]json.RawMessage `json:"metadata"`
	Body         struct {
		DeltaKind string          `json:"delta_kind"`
		Delta     json.RawMessage `json:"delta"`
	} `json:"body"`
}

// TextChunk is a plain text chunk (a non-final e2a.chunk whose delta is
// text and a JSON string) as the text fast paths read it from a frame:
// its ids, its llm_response_id ("" when it has none that is a string) and
// its text, as encoding/json reads them from the frame's bytes.
type TextChunk struct {
	ResponseID, RequestID, TaskID, ContextID, SessionID string
	LLMResponseID                                       string
	Text                                                string
}

// ReadTextChunk reads a plain text chunk from f: from the decoded frame
// when the reader decoded it, else with one partial decode of its bytes
// (the renderer is a [PassThrough]). ok is false for any other frame: the
// renderer then decodes it ([Frame.Decoded]) and takes its general path.
// A2A's text fast path (package protocols/a2a) writes its event from it.
// As for the E2A renderers, which pass frames through reading only their
// head, a text chunk whose other members (timestamp, provenance…) have the
// wrong JSON type is read rather than refused as an invalid frame.
func ReadTextChunk(f *Frame) (c TextChunk, ok bool) {
	tf, text, ok := readTextChunk(f)
	if !ok {
		return c, false
	}
	c = TextChunk{ResponseID: tf.ResponseID, RequestID: tf.RequestID, TaskID: tf.TaskID, ContextID: tf.ContextID,
		SessionID: tf.SessionID, Text: text}
	if f.Response != nil {
		c.LLMResponseID, _ = f.Response.Metadata[metaLLMResponseID].(string)
	} else if raw, ok := tf.Metadata[metaLLMResponseID]; ok && len(raw) > 0 && raw[0] == '"' {
		// Declared here, not decoded into c: the decoder's pointer moves
		// what it points to to the heap, on this path only.
		var llm string
		if json.Unmarshal(raw, &llm) != nil {
			return TextChunk{}, false
		}
		c.LLMResponseID = llm
	}
	return c, true
}

// ReadPlainText is [ReadTextChunk] without the llm_response_id (left
// ""), for a fast path that does not write it (ACP's): nothing but the
// ids, the session and the text is read.
func ReadPlainText(f *Frame) (c TextChunk, ok bool) {
	tf, text, ok := readTextChunk(f)
	if !ok {
		return c, false
	}
	return TextChunk{ResponseID: tf.ResponseID, RequestID: tf.RequestID, TaskID: tf.TaskID, ContextID: tf.ContextID,
		SessionID: tf.SessionID, Text: text}, true
}

// readTextChunk reads a non-final e2a.chunk frame whose delta is text and
// a JSON string: from the decoded frame when the reader decoded it, else
// with one partial decode of its bytes. ok is false for any other frame.
func readTextChunk(f *Frame) (tf textFrame, text string, ok bool) {
	if !fastText || (f.Response == nil && (f.rkind != e2a.KindChunk || f.final)) {
		return tf, "", false
	}
	if f.Response != nil {
		resp := f.Response
		tf.ResponseID, tf.RequestID, tf.IsFinal, tf.ResponseKind = resp.ResponseID, resp.RequestID, resp.IsFinal, resp.ResponseKind
		tf.TaskID, tf.ContextID, tf.SessionID = resp.TaskID, resp.ContextID, resp.SessionID
		if resp.ResponseKind != e2a.KindChunk || resp.IsFinal || !decodeInto(resp.Body, &tf.Body) {
			return tf, "", false
		}
	} else if tf, ok = f.text.textFrame(); !ok && (f.text.ok || !tf.scan(f.Raw)) {
		// The reader's head scan gave no textFrame (or a frame made
		// without one): scanned here, or decoded when the scan declines.
		tf = textFrame{}
		if !decodeInto(f.Raw, &tf) {
			return tf, "", false
		}
	}
	if tf.ResponseKind != e2a.KindChunk || tf.IsFinal || tf.Body.DeltaKind != e2a.DeltaText ||
		len(tf.Body.Delta) == 0 || tf.Body.Delta[0] != '"' {
		return tf, "", false
	}
	if t, ok := plainString(tf.Body.Delta); ok {
		return tf, t, true
	}
	if !decodeInto(tf.Body.Delta, &text) {
		return tf, "", false
	}
	return tf, text, true
}

// decodeInto is json.Unmarshal of data into *out, through a copy: the
// decoder's pointer moves what it points to to the heap, and a caller's
// variable passed to it directly would be moved there on every call, not
// only on this (rare) path.
//
//go:noinline
func decodeInto[T any](data []byte, out *T) bool {
	var v T
	if json.Unmarshal(data, &v) != nil {
		return false
	}
	*out = v
	return true
}

// scan reads a text frame's fields from valid JSON data (a frame the
// reader accepted) without the reflective decoder: the top-level members
// and those of body, strings taken from their bytes. It gives what
// json.Unmarshal into textFrame gives or returns false, leaving data to
// json.Unmarshal: a key written with escapes or in another case (which
// encoding/json would match), a string with escapes, a value of another
// type (FuzzTextFrameScan).
func (tf *textFrame) scan(data []byte) bool {
	*tf = textFrame{}
	return jsonstr.Members(data, tf.member)
}

// member reads one top-level member of a frame into tf (see scan).
func (tf *textFrame) member(key, val []byte) bool {
	switch string(key) {
	case "response_id":
		return scanString(val, &tf.ResponseID)
	case "request_id":
		return scanString(val, &tf.RequestID)
	case "response_kind":
		return scanString(val, &tf.ResponseKind)
	case "task_id":
		return scanString(val, &tf.TaskID)
	case "context_id":
		return scanString(val, &tf.ContextID)
	case "session_id":
		return scanString(val, &tf.SessionID)
	case "is_final":
		return scanBool(val, &tf.IsFinal)
	case "metadata":
		return tf.scanMetadata(val)
	case "body":
		return tf.scanBody(val)
	}
	return !textFrameKey(key)
}

// scanMetadata reads the metadata member's value val (nil: no member).
func (tf *textFrame) scanMetadata(val []byte) bool {
	if val == nil {
		return true
	}
	if string(val) == "null" {
		tf.Metadata = nil
		return true
	}
	if len(val) == 0 || val[0] != '{' {
		return false
	}
	// Only llm_response_id is read; the map holds it alone. A repeated
	// metadata member adds to the map, as encoding/json does.
	m := tf.Metadata
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	ok := jsonstr.Members(val, func(k, v []byte) bool {
		if string(k) == metaLLMResponseID {
			m[metaLLMResponseID] = v
		} else if bytes.EqualFold(k, []byte(metaLLMResponseID)) {
			return false
		}
		return true
	})
	tf.Metadata = m
	return ok
}

// scanBody reads the body member's value val (nil: no member).
func (tf *textFrame) scanBody(val []byte) bool {
	if val == nil || string(val) == "null" {
		return true
	}
	if len(val) == 0 || val[0] != '{' {
		return false
	}
	return jsonstr.Members(val, func(k, v []byte) bool {
		switch string(k) {
		case "delta_kind":
			return scanString(v, &tf.Body.DeltaKind)
		case "delta":
			// json.RawMessage keeps null as written too.
			tf.Body.Delta = v
			return true
		}
		return !bytes.EqualFold(k, []byte("delta_kind")) && !bytes.EqualFold(k, []byte("delta"))
	})
}

// textFrameKey reports whether encoding/json would match key (not one of
// them exactly) to a member textFrame reads: keys match without regard to
// case.
func textFrameKey(key []byte) bool { return foldsTo(key, textFrameKeys) }

// foldsTo reports whether key equals one of keys without regard to case,
// as encoding/json matches member names to fields (bytes.EqualFold, Unicode
// folding: "ſ" matches "s", the Kelvin sign "k"). An ASCII key can only
// match a key of its length, which spares the comparisons for the other
// members of a frame, read on every frame.
func foldsTo(key []byte, keys []string) bool {
	ascii := true
	for _, c := range key {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	for _, k := range keys {
		if (!ascii || len(k) == len(key)) && bytes.EqualFold(key, []byte(k)) {
			return true
		}
	}
	return false
}

// textHead is what a reader's head scan ([headScan]) keeps of a frame for
// the text fast paths, in the same pass: the top-level members textFrame
// reads, with body and metadata kept as their raw values and read only
// when a renderer asks (readTextChunk). A frame whose members the scan
// does not handle, or with body or metadata twice (encoding/json merges
// repeated objects), has ok false and is scanned again as before.
type textHead struct {
	tf             textFrame // Body and Metadata unset
	body, metadata []byte    // the raw values; nil when absent
	ok             bool
}

// member takes one top-level member of the frame (see textHead).
func (th *textHead) member(key, val []byte) {
	if !th.ok {
		return
	}
	switch string(key) {
	case "body":
		th.ok = th.body == nil
		th.body = val
	case "metadata":
		th.ok = th.metadata == nil
		th.metadata = val
	default:
		th.ok = th.tf.member(key, val)
	}
}

// textFrame returns the frame's textFrame from the head, with body and
// metadata read; false when the head cannot give it.
func (th *textHead) textFrame() (tf textFrame, ok bool) {
	if !th.ok {
		return tf, false
	}
	tf = th.tf
	ok = tf.scanBody(th.body) && tf.scanMetadata(th.metadata)
	return tf, ok
}

// textFrameKeys are the members textFrame reads, for the case-insensitive
// matches encoding/json would make.
var textFrameKeys = []string{"response_id", "request_id", "response_kind", "task_id", "context_id", "session_id", "is_final", "metadata", "body"}

// scanBool sets *dst to the JSON boolean val; false for any other value
// (null included: encoding/json would leave *dst as it is, a shape left to
// it).
func scanBool(val []byte, dst *bool) bool {
	switch string(val) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return false
	}
	return true
}

// scanString sets *dst to the JSON string val when it needs no decoding;
// null leaves *dst as it is (as json.Unmarshal does).
func scanString(val []byte, dst *string) bool {
	if string(val) == "null" {
		return true
	}
	s, ok := plainString(val)
	if ok {
		*dst = s
	}
	return ok
}

// plainString is the JSON string val without its quotes when it has no
// escape, no control character and is valid UTF-8 (what json.Unmarshal
// would give); false otherwise. The string shares val's bytes instead of
// copying them: val is always part of a frame's Raw, which nothing
// modifies (see [Frame]), so the string stays what it was read as for as
// long as anything holds it, and keeps Raw alive no longer than the frame
// itself is. This saves one allocation per id and text of every frame on
// the fast paths.
func plainString(val []byte) (string, bool) {
	in, ok := jsonstr.Plain(val)
	if !ok || len(in) == 0 {
		return "", ok
	}
	return unsafe.String(&in[0], len(in)), true
}
