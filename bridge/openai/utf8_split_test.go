package openai_test

import "testing"

// TestToolArgumentsSplitMidUTF8: a model streams bytes, and a server may
// cut a tool call's arguments between two fragments inside a character
// ("€" is E2 82 AC: "{\"x\":\"\xe2\x82" then "\xac\"}"), each fragment's
// JSON string holding its bytes as they are. The official accumulator
// joins the fragments' bytes, so the call's arguments are {"x":"€"}. The
// bridge decoded each fragment with json.Unmarshal, which turns every
// invalid UTF-8 byte into U+FFFD before the fragments are joined: the
// client got {"x":"���"}, arguments no tool reads as the model meant.
func TestToolArgumentsSplitMidUTF8(t *testing.T) {
	head := `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":`
	events := []string{
		head + `{"role":"assistant","tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\":\"` + "\xe2\x82" + `"}}]},"finish_reason":null}]}`,
		head + `{"tool_calls":[{"index":0,"function":{"arguments":"` + "\xac" + `\"}"}}]},"finish_reason":null}]}`,
		head + `{},"finish_reason":"tool_calls"}]}`,
	}
	toolCallsAsOfficial(t, events, `[a f {"x":"€"}]`)
}
