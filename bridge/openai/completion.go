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
// reason become the same frames a stream would give; the error object is
// the upstream's error, classified as one sent in a stream (a rate limit
// or a server error retryable, a refused request not).

// startsAsJSON reports whether br's first bytes, after white space and a
// byte order mark, open a JSON object.
func startsAsJSON(br *bufio.Reader) bool {
	for n := 1; n <= br.Size(); n++ {
		b, err := br.Peek(n)
		b = bytes.TrimLeft(bytes.TrimPrefix(b, []byte("\ufeff")), " \t\r\n")
		if len(b) > 0 {
			return b[0] == '{'
		}
		if err != nil {
			return false
		}
	}
	return false
}

// wholeAnswer reads the JSON object br holds (at most max bytes) and
// returns it as an event stream: a chat.completion as the one chunk that
// carries it whole, then [DONE]. An error object is returned as the
// upstream's error; anything else is upstream_protocol_error.
func wholeAnswer(br io.Reader, max int, scrub func(string) string) (io.Reader, error) {
	raw, err := io.ReadAll(io.LimitReader(br, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > max {
		return nil, bridge.Errorf(bridge.CodeProtocol, false, "upstream answered a JSON object larger than %d bytes instead of a stream", max)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil, bridge.Errorf(bridge.CodeProtocol, false, "upstream answered neither an event stream nor a JSON object: %s", quote(raw, scrub))
	}
	if isSet(obj["error"]) || string(obj["object"]) == `"error"` {
		return nil, errorObject(raw, "upstream error (answered with 200): ", scrub)
	}
	c, err := asChunk(obj)
	if err != nil {
		return nil, bridge.Errorf(bridge.CodeProtocol, false, "upstream answered a JSON object that is not a chat completion (%v): %s", err, quote(raw, scrub))
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "data: %s\n\ndata: [DONE]\n\n", c)
	return &b, nil
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
				c["index"] = json.RawMessage(fmt.Sprint(i))
			}
			msg["tool_calls"], _ = json.Marshal(calls)
		}
		delete(ch, "message")
		ch["delta"], _ = json.Marshal(msg)
	}
	obj["choices"], _ = json.Marshal(choices)
	obj["object"] = json.RawMessage(`"chat.completion.chunk"`)
	return json.Marshal(obj)
}
