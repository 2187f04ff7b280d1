package openai

import (
	"bytes"
	"encoding/json"
	"testing"
)

// oldRequest is the request as it was encoded before encode: its stream
// options a map, the whole through json.Marshal and MarshalJSON.
type oldRequest struct {
	Model         string                     `json:"model"`
	Messages      []message                  `json:"messages"`
	Stream        bool                       `json:"stream"`
	StreamOptions map[string]any             `json:"stream_options,omitempty"`
	Params        map[string]json.RawMessage `json:"-"`
}

func (r oldRequest) MarshalJSON() ([]byte, error) {
	type fixed oldRequest
	b, err := json.Marshal(fixed(r))
	if err != nil || len(r.Params) == 0 {
		return b, err
	}
	extra, err := json.Marshal(r.Params)
	if err != nil {
		return nil, err
	}
	return append(append(b[:len(b)-1], ','), extra[1:]...), nil
}

// encodeCases are requests of every shape the bridge sends.
func encodeCases() []request {
	msgs := []message{
		{Role: "system", Content: "be <brief> & \u2028 kind"},
		{Role: "user", Content: "hello \xff \"quoted\" \\ \n\t é 😀"},
		{Role: "assistant", Content: nil, ToolCalls: []callParam{{ID: "call_1", Type: "function",
			Function: functionCall{Name: "get", Arguments: `{"a": "<b>"}`}}}},
		{Role: "tool", Content: "42", ToolCallID: "call_1"},
		{Role: "user", Content: []contentPart{{Type: "text", Text: "see"}, {Type: "image_url", ImageURL: &imageURL{URL: "https://x/y.png?a=1&b=2"}},
			{Type: "input_audio", InputAudio: &inputAudio{Data: "AAAA", Format: "wav"}}}},
	}
	params := map[string]json.RawMessage{"temperature": json.RawMessage(`0.5`), "stop": json.RawMessage(`[ "<end>" , "&" ]`),
		"metadata": json.RawMessage(`{"b": "1", "a": "\u2028"}`), "max_tokens": json.RawMessage(`100`)}
	var out []request
	plain := []message{msgs[0], msgs[1], {Role: "assistant", Content: "", ToolCallID: ""}, msgs[3], {Role: "user", Content: "</script>"}}
	for _, ms := range [][]message{msgs[1:2], msgs, {}, nil, plain, msgs[2:3]} {
		for _, p := range []map[string]json.RawMessage{nil, {}, params} {
			for _, usage := range []bool{true, false} {
				r := request{Model: "m <1> & é", Messages: ms, Stream: true, Params: p}
				if usage {
					r.StreamOptions = includeUsage
				}
				out = append(out, r)
			}
		}
	}
	return out
}

// TestEncodeIsTheOldEncoding: the request's body is byte for byte what
// json.Marshal of the request with its map of stream options wrote.
func TestEncodeIsTheOldEncoding(t *testing.T) {
	for i, r := range encodeCases() {
		old := oldRequest{Model: r.Model, Messages: r.Messages, Stream: r.Stream, Params: r.Params}
		if r.StreamOptions != nil {
			old.StreamOptions = map[string]any{"include_usage": true}
		}
		want, err := json.Marshal(old)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.encode()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("case %d: encoded\n%s (%v), want\n%s", i, got, err, want)
		}
		if b, err := json.Marshal(r); err != nil || !bytes.Equal(b, want) {
			t.Errorf("case %d: json.Marshal\n%s (%v), want\n%s", i, b, err, want)
		}
	}
}

// TestEncodeAllocs: the body of a call as `e2a bench --bridge openai`
// makes it (one user message, stream options) is encoded in one
// allocation, its bytes (it was 9: the request boxed twice, the map of
// stream options and its sorted keys, the body compacted and copied),
// without reflection (appendPlain: encoding/json's deep calls grew the
// bridge's goroutine stacks, most of what the encoding cost in a
// profile of e2a bench --bridge openai).
func TestEncodeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	r := request{Model: "bench-model", Messages: []message{{Role: "user", Content: "bench request"}}, Stream: true}
	n := testing.AllocsPerRun(100, func() {
		r.StreamOptions = includeUsage
		if _, err := r.encode(); err != nil {
			t.Fatal(err)
		}
	})
	if n > 1 {
		t.Errorf("encoding a request: %v allocations, want at most 1", n)
	}
	if _, ok := r.appendPlain(); !ok {
		t.Error("the request of one user message is not encoded by appendPlain")
	}
}

// TestFinalResultJSONLen: the final result's JSONLen is the length of its
// encoding (what the bridge's count encoded it for), or not told (a usage
// it cannot count without compacting and escaping it).
func TestFinalResultJSONLen(t *testing.T) {
	strs := []string{"", "plain text", "<b>&</b>", "quote \" back \\ slash", "ctl \x00 \x01 \x1f \x7f \n\r\t\b\f", "é 😀 中",
		"\u2028 \u2029", "bad \xff \xc3 utf8 \xed\xa0\x80", "\xf4\x90\x80\x80", "end \xe2\x80"}
	usages := []json.RawMessage{nil, json.RawMessage(`{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}`),
		json.RawMessage(`{"a": 1}`), json.RawMessage(`{"a":"<"}`), json.RawMessage(`{"a":"é"}`)}
	for _, s := range strs {
		for _, u := range usages {
			r := finalResult{Content: s, FinishReason: "stop", Model: s, Refusal: s, Usage: u}
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			n, ok := r.JSONLen()
			if ok && n != int64(len(b)) {
				t.Errorf("JSONLen of %s: %d, want %d", b, n, len(b))
			}
			if simple := u == nil || bytes.Equal(u, usages[1]); ok != simple {
				t.Errorf("JSONLen of %s told %v, want %v", b, ok, simple)
			}
		}
	}
	r := finalResult{Content: "x", FinishReason: "stop", Model: "m", Usage: usages[1]}
	if n := testing.AllocsPerRun(100, func() { _, _ = r.JSONLen() }); n != 0 && !raceEnabled {
		t.Errorf("JSONLen: %v allocations, want 0", n)
	}
}
