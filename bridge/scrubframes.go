package bridge

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// Which frames the Handler scrubs (a Scrubber upstream's credentials taken
// out of their bodies before they are written).
//
// An upstream fills with its own words, which may quote the request's
// headers, every frame but the answer's streamed content: its errors
// (e2a.error, acp.jsonrpc_error, a failed status), its final frames (an
// interrupt's question, an auth-required message, an acp.prompt_result,
// an e2a.complete it wrote whole), its status messages (a2a.stream_event
// status_update, a2a.task, a2a.message) and anything else (ext). Those are
// scrubbed: one frame or a few per request, so the cost (a byte scan of a
// raw body; an encoding of a typed one) is paid once or so per request.
// So is the metadata it sets for its frames (Writer.SetMetadata: an HTTP
// agent's frames carry their own), once per change. The A2A bridge's
// working status-updates are a2a.stream_event status_update frames,
// scrubbed so; a completed status's message, which it writes as text
// deltas, it scrubs itself (a2abridge: turn.scrubbed).
//
// Not scrubbed is the answer's content as it streams: e2a.chunk deltas
// (Writer.Chunk, and e2a.chunk frames written with Write), non-final
// acp.session_update frames (ACP's message chunks) and the A2A bridge's
// artifact parts (a typed a2a.stream_event artifact_update: data and file
// parts, file bytes included). Those are the hot path (a frame per token
// or so: bridge/openai writes every token with Chunk, and a model never
// sees the bridge's credentials), and a per-frame scan would not make the
// answer safe anyway: a secret the agent puts in its answer may be split
// across two deltas. Measured (BenchmarkScrubFrame, 2 vCPUs, a Client
// with an API key and a header): 60–90 ns a 100 B text delta, 0.45 µs
// and 3 allocations a raw 100 B e2a.chunk frame; for a 500-token answer
// 30–45 µs, against 100–150 µs of the bridge's own code per request
// (docs/performance.md). A final or interrupt frame costs 1–3 µs, once.
// The result of Writer.Complete that a bridge built from those deltas (a
// map or struct: the answer's text again) is content too; a result the
// upstream wrote whole (json.RawMessage, []byte, string: an HTTP agent's
// JSON answer) is scrubbed.

// scrubsFrame reports whether a frame written with Writer.Write is
// scrubbed (see above).
func scrubsFrame(kind, status string, body any, final bool) bool {
	if final || status == e2a.StatusFailed {
		return true
	}
	switch kind {
	case e2a.KindChunk, e2a.KindACPSessionUpd:
		return false
	case e2a.KindA2AStreamEvent:
		switch b := body.(type) {
		case e2a.StreamEventBody:
			return b.Branch != e2a.BranchArtifactUpdate
		case *e2a.StreamEventBody:
			return b != nil && b.Branch != e2a.BranchArtifactUpdate
		}
	}
	return true
}

// scrubBody returns body with scrub applied to every string it holds: a
// raw body (json.RawMessage, []byte, string) as it is, any other encoded
// to JSON first. It returns body itself when nothing was replaced (or
// when body does not encode: the writer refuses it then).
func scrubBody(body any, scrub func(string) string) any {
	switch b := body.(type) {
	case nil:
		return nil
	case json.RawMessage:
		if out, ok := scrubJSON(b, scrub); ok {
			return json.RawMessage(out)
		}
		return b
	case []byte:
		if out, ok := scrubJSON(b, scrub); ok {
			return out
		}
		return b
	case string:
		return scrub(b)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // <, > and & stay as they are, for the scan
	if enc.Encode(body) != nil {
		return body
	}
	if out, ok := scrubJSON(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), scrub); ok {
		return json.RawMessage(out)
	}
	return body
}

// scrubJSON applies scrub to the JSON text raw and reports whether it
// replaced anything. The text is scanned as it is (without escapes, each
// string's bytes are its value); a text with an escape a credential's
// characters may be written with (\", \\, \/, \uXXXX: an encoder
// escaping &, <, > or non-ASCII, or any character) is also decoded, its
// strings (keys included) scrubbed, and encoded again when anything was
// replaced. (\n, \t and the other control escapes stand for characters
// no header value holds: a text with only those is not decoded.) Text
// that does not decode is scanned as it is.
func scrubJSON(raw []byte, scrub func(string) string) ([]byte, bool) {
	s := string(raw)
	out := scrub(s)
	changed := out != s
	if changed {
		raw = []byte(out)
	}
	if !credentialEscapes(out) {
		return raw, changed
	}
	if dec, ok := scrubDecoded(raw, scrub); ok {
		return dec, true
	}
	return raw, changed
}

// credentialEscapes reports whether the JSON text s holds an escape that
// may stand for a character of a credential: \", \\, \/ or \uXXXX.
func credentialEscapes(s string) bool {
	for {
		i := strings.IndexByte(s, '\\')
		if i < 0 || i+1 >= len(s) {
			return false
		}
		switch s[i+1] {
		case '"', '\\', '/', 'u':
			return true
		}
		s = s[i+2:]
	}
}

// scrubDecoded decodes raw, scrubs its strings and encodes it again; ok
// is false when nothing was replaced or raw does not decode.
func scrubDecoded(raw []byte, scrub func(string) string) ([]byte, bool) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil, false
	}
	v, changed := scrubValue(v, scrub)
	if !changed {
		return nil, false
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	return out, true
}

// ScrubValue takes what scrub replaces (an upstream's credentials:
// Scrubber.Scrub) out of the strings of a decoded JSON value, object keys
// included, in place where it can; it reports a change. A bridge scrubs
// with it the structured words of an upstream it writes itself (the A2A
// bridge's status messages' data parts).
func ScrubValue(v any, scrub func(string) string) (any, bool) { return scrubValue(v, scrub) }

// scrubValue scrubs the strings of a decoded JSON value (object keys
// included), in place where it can.
func scrubValue(v any, scrub func(string) string) (any, bool) {
	switch x := v.(type) {
	case string:
		out := scrub(x)
		return out, out != x
	case []any:
		changed := false
		for i, e := range x {
			if r, c := scrubValue(e, scrub); c {
				x[i], changed = r, true
			}
		}
		return x, changed
	case map[string]any:
		changed := false
		var renamed map[string]any
		for k, e := range x {
			r, c := scrubValue(e, scrub)
			if nk := scrub(k); nk != k {
				if renamed == nil {
					renamed = map[string]any{}
				}
				renamed[nk] = r
				delete(x, k)
				changed = true
				continue
			}
			if c {
				x[k], changed = r, true
			}
		}
		for k, e := range renamed {
			x[k] = e
		}
		return x, changed
	}
	return v, false
}
