package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/e2a-pipeline/pipeline/bridge"
)

// A server may answer a call asking for a stream (stream: true) with one
// JSON object instead: a whole chat.completion (a server or proxy that
// does not stream, or not with tools: some LiteLLM backends, simple
// OpenAI-compatible wrappers), or an error object with status 200. The
// official clients read the first as the completion (openai-python's
// non-streaming parse) and the second as the error it is. The bridge
// does the same: the completion is read as the one chunk that carries it
// whole (asStream), so its text, reasoning, tool calls, usage and finish
// reason become the same frames a stream would give; the error object (or
// Google's array holding one) is the upstream's error, classified as one
// sent in a stream (a rate limit or a server error retryable, a refused
// request not).

// bom is the byte order mark a body may start with.
const bom = "\ufeff"

// startsAsJSON reports whether br's first bytes, after a byte order mark
// and white space, open a JSON object, or an array (Google's errors are
// an array holding the error object).
func startsAsJSON(br *bufio.Reader) bool {
	for n := 1; n <= br.Size(); n++ {
		b, err := br.Peek(n)
		if len(b) < len(bom) && bytes.HasPrefix([]byte(bom), b) && err == nil {
			continue // the start of a byte order mark
		}
		b = bytes.TrimLeft(bytes.TrimPrefix(b, []byte(bom)), " \t\r\n")
		if len(b) > 0 {
			return b[0] == '{' || b[0] == '['
		}
		if err != nil {
			return false
		}
	}
	return false
}

// wholeAnswer reads the JSON object br holds (at most max bytes) and
// returns it as an event stream: a chat.completion as the one chunk that
// carries it whole, then [DONE]. An error object, or an array whose first
// member is one (Google's form, which Gemini's OpenAI-compatible endpoint
// answers), is returned as the upstream's error; anything else is
// upstream_protocol_error, but an object that a close-delimited body
// (closeDelimited: bridge.CloseDelimited) ends in its middle: that is the
// connection cut, upstream_unavailable and retryable, as an event stream
// that ends mid-line.
func wholeAnswer(br io.Reader, max int, closeDelimited bool, scrub func(string) string) (io.Reader, error) {
	raw, err := io.ReadAll(io.LimitReader(br, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > max {
		return nil, bridge.Errorf(bridge.CodeProtocol, false, "upstream answered a JSON object larger than %d bytes instead of a stream", max)
	}
	raw = bytes.TrimLeft(bytes.TrimPrefix(raw, []byte(bom)), " \t\r\n") // encoding/json refuses a byte order mark
	var list []json.RawMessage
	if bytes.HasPrefix(raw, []byte("[")) && json.Unmarshal(raw, &list) == nil && len(list) > 0 && isErrorObject(list[0]) {
		return nil, errorObject(list[0], "upstream error (answered with 200): ", scrub)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		if closeDelimited && errors.Is(json.NewDecoder(bytes.NewReader(raw)).Decode(new(json.RawMessage)), io.ErrUnexpectedEOF) {
			return nil, bridge.Errorf(bridge.CodeUnavailable, true, "upstream closed the answer before its end: the JSON answer ended mid-value: %s", quote(raw, scrub))
		}
		return nil, bridge.Errorf(bridge.CodeProtocol, false, "upstream answered neither an event stream nor a JSON object: %s", quote(raw, scrub))
	}
	if isSet(obj["error"]) || string(obj["object"]) == `"error"` {
		return nil, errorObject(raw, "upstream error (answered with 200): ", scrub)
	}
	c, err := asChunk(obj)
	if err != nil {
		return nil, bridge.Errorf(bridge.CodeProtocol, false, "upstream answered a JSON object that is not a chat completion (%v): %s", err, quote(raw, scrub))
	}
	stream := append(append([]byte("data: "), c...), "\n\ndata: [DONE]\n\n"...)
	return &wholeStream{Reader: bytes.NewReader(stream), line: len("data: ") + len(c)}, nil
}

// wholeStream is the event stream wholeAnswer makes of a JSON object. Its
// one event, the object as a chunk, is a few bytes longer than the object
// (renamed members, numbered tool calls, the "data: " field name), which
// was bounded when it was read: newSSEReader reads it with a bound of at
// least its line, or an object within the bound would fail as a line
// longer than it.
type wholeStream struct {
	*bytes.Reader
	line int // the length of the event's data line
}

// isErrorObject reports a JSON object holding an error: {"error": ...}, or
// vLLM's {"object": "error", ...}.
func isErrorObject(raw []byte) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(raw, &obj) == nil && (isSet(obj["error"]) || string(obj["object"]) == `"error"`)
}

// errNotCompletion: the object has no choices with a message.
var errNotCompletion = errors.New("no choices[].message")

// asChunk returns a chat.completion object as the chat.completion.chunk
// that carries it whole: each choice's message as its delta, each tool
// call numbered by its place (a stream's tool_calls[].index), every other
// member (id, model, usage, finish_reason, the message's reasoning)
// kept as the server sent it.
func asChunk(obj map[string]json.RawMessage) ([]byte, error) {
	var choices []map[string]json.RawMessage
	if err := json.Unmarshal(obj["choices"], &choices); err != nil || len(choices) == 0 {
		return nil, errNotCompletion
	}
	for _, ch := range choices {
		var msg map[string]json.RawMessage
		if err := json.Unmarshal(ch["message"], &msg); err != nil || msg == nil {
			return nil, errNotCompletion
		}
		if isSet(msg["tool_calls"]) {
			var calls []map[string]json.RawMessage
			if err := json.Unmarshal(msg["tool_calls"], &calls); err != nil {
				return nil, fmt.Errorf("tool_calls: %w", err)
			}
			for i, c := range calls {
				if c == nil { // a null call: numbering it panicked
					return nil, fmt.Errorf("tool_calls[%d] is null", i)
				}
				c["index"] = json.RawMessage(fmt.Sprint(i))
			}
			msg["tool_calls"] = marshal(calls)
		}
		delete(ch, "message")
		ch["delta"] = marshal(msg)
	}
	obj["choices"] = marshal(choices)
	obj["object"] = json.RawMessage(`"chat.completion.chunk"`)
	return marshal(obj), nil
}

// marshal encodes v, made of values decoded from valid JSON (it cannot
// fail), as encoding/json does but with <, > and & kept as they are:
// json.Marshal writes each as six bytes (\u003c), so a completion of code
// or HTML grew up to six times as a chunk.
func marshal(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
