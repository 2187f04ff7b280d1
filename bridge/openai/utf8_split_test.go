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

// TestTextSplitMidCharacter: a server may cut a character between two
// deltas, as bytes (llama.cpp's server streams a token's bytes as they
// come: "€" is E2 82 AC, "\xe2\x82" in one delta, "\xac" in the next) or
// as a JSON surrogate pair ("\ud83d" in one, "\ude00" in the next: "😀").
// The client must get the character once, whole, in its text (and
// reasoning) deltas and in the final content. The bridge decoded each
// delta alone, each part becoming U+FFFD: the client read "���!" and
// "��!". (openai-go's accumulator joins the bytes, "€!", but not the
// escaped halves.) A sequence that never completes is one U+FFFD at the
// end; an invalid byte or a lone surrogate inside a delta is U+FFFD, as
// encoding/json makes it.
func TestTextSplitMidCharacter(t *testing.T) {
	head := `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":`
	finish := head + `{},"finish_reason":"stop"}]}`
	for _, tc := range []struct {
		name      string
		deltas    []string // delta objects
		text      string
		reasoning string
	}{
		{"bytes", []string{`{"content":"` + "\xe2\x82" + `"}`, `{"content":"` + "\xac!" + `"}`}, "€!", ""},
		{"bytes one by one", []string{`{"content":"` + "a\xf0" + `"}`, `{"content":"` + "\x9f" + `"}`, `{"content":"` + "\x98" + `"}`, `{"content":"` + "\x80" + `"}`}, "a😀", ""},
		{"surrogate pair", []string{`{"content":"\ud83d"}`, `{"content":"\ude00!"}`}, "😀!", ""},
		{"reasoning bytes", []string{`{"reasoning_content":"` + "\xe2\x82" + `"}`, `{"reasoning_content":"` + "\xac" + `"}`, `{"content":"ok"}`}, "ok", "€"},
		{"reasoning surrogate pair", []string{`{"reasoning":"\ud83d"}`, `{"reasoning":"\ude00"}`}, "", "😀"},
		{"never completed", []string{`{"content":"` + "a\xe2\x82" + `"}`}, "a\ufffd", ""},
		{"lone high surrogate at the end", []string{`{"content":"a\ud83d"}`}, "a\ufffd", ""},
		{"lone surrogates inside", []string{`{"content":"a\ud83db\ude00c"}`}, "a\ufffdb\ufffdc", ""},
		{"invalid byte inside", []string{`{"content":"` + "a\xffb" + `"}`}, "a\ufffdb", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := []string{}
			for _, d := range tc.deltas {
				events = append(events, head+d+`,"finish_reason":null}]}`)
			}
			parsedChunks(t, append(events, finish))
			body := ""
			for _, ev := range events {
				body += "data: " + ev + "\n\n"
			}
			w, err := serveEvents(t, body+"data: "+finish+"\n\ndata: [DONE]\n\n")
			if err != nil || !w.Final() {
				t.Fatalf("err %v, kinds %v", err, w.Kinds())
			}
			a := read(t, w.Frames())
			if a.text != tc.text || a.reasoning != tc.reasoning || a.result["content"] != tc.text {
				t.Fatalf("text %q, reasoning %q, final content %q; want text %q, reasoning %q",
					a.text, a.reasoning, a.result["content"], tc.text, tc.reasoning)
			}
		})
	}
}
