package openai_test

import (
	"encoding/json"
	"testing"

	oai "github.com/openai/openai-go/v3"
)

// TestStreamedMessageChunk: a server that answers a streamed call with the
// whole completion as one event, its choice holding a message instead of a
// delta (WebAI-to-API's Gemini endpoint, issue #55: "stream=true, the
// response still returns message instead of streaming delta"), then
// [DONE]. The bridge read no delta, and completed the request with an
// empty answer and finish_reason stop: the answer was lost without a word.
// The message is now read as the delta when the stream carried no delta
// before it (a message after streamed deltas would repeat them).
func TestStreamedMessageChunk(t *testing.T) {
	events := []string{
		`{"id":"chatcmpl-msg1","object":"chat.completion","created":1,"model":"gemini-3","choices":[{"index":0,"message":{"role":"assistant","content":"The whole answer.","tool_calls":[{"id":"call_m1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"stop"}]}`,
	}
	// The official client takes the event as a chunk (it reads no delta:
	// the message stays in its raw JSON).
	var acc oai.ChatCompletionAccumulator
	for _, ev := range events {
		var c oai.ChatCompletionChunk
		if err := json.Unmarshal([]byte(ev), &c); err != nil || !acc.AddChunk(c) {
			t.Fatalf("the official accumulator refuses %s: %v", ev, err)
		}
		var raw struct {
			Message struct{ Content string } `json:"message"`
		}
		if err := json.Unmarshal([]byte(c.Choices[0].RawJSON()), &raw); err != nil || raw.Message.Content != "The whole answer." {
			t.Fatalf("the official chunk's choice holds no message: %s", c.Choices[0].RawJSON())
		}
	}
	body := ""
	for _, ev := range events {
		body += "data: " + ev + "\n\n"
	}
	w, err := serveEvents(t, body+"data: [DONE]\n\n")
	if err != nil {
		t.Fatal(err)
	}
	a := read(t, w.Frames())
	if a.text != "The whole answer." || len(a.calls) != 1 || a.calls[0] != (call{"call_m1", "f", `{"a":1}`}) ||
		a.result["content"] != "The whole answer." {
		t.Fatalf("text %q, calls %v, result %v; want the message's text and call", a.text, a.calls, a.result)
	}

	// A message after streamed deltas (a final chunk repeating the whole
	// answer) is not read again.
	deltas := `data: {"id":"c2","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c2","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	w, err = serveEvents(t, deltas)
	if err != nil || deltaText(t, w) != "Hi" {
		t.Fatalf("deltas then a message: text %q, err %v; want \"Hi\" once", deltaText(t, w), err)
	}
}
