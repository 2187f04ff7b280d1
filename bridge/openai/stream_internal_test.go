package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
)

// TestSSEReader: events as the SSE format defines them: LF or CRLF line
// ends, data lines joined, comments, id and retry skipped, a last event
// without its blank line (marked cut, "!", when the stream ended inside
// its last line); an event whose data is empty or blank is not
// dispatched; any other line is errSSE, or errCut when the stream ended
// inside it.
func TestSSEReader(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // event|data, "!" after a cut one
		err  error    // after the events (nil: io.EOF)
	}{
		{"data: a\n\ndata: b\n\n", []string{"|a", "|b"}, nil},
		{"data: a\r\n\r\ndata:b\r\n\r\n", []string{"|a", "|b"}, nil},
		{": keep-alive\n\nid: 1\nretry: 10\ndata: x\ndata: y\n\n", []string{"|x\ny"}, nil},
		{"event: error\ndata: {}\n\ndata: z", []string{"error|{}", "|z!"}, nil},
		{"data: z\n", []string{"|z"}, nil},
		{"data: {\"a\":1}\ndata: {\"b", []string{"|{\"a\":1}\n{\"b!"}, nil},
		{"\n\n\n", nil, nil},
		{"data:\n\ndata: a\n\ndata: \n\nevent: error\ndata:\n\ndata:\ndata:\n\ndata: b\n\ndata:", []string{"|a", "|b"}, nil},
		{"data: a\n\nnot sse\n\n", []string{"|a"}, errSSE},
		{"{\"id\":1}\n", nil, errSSE},
		{"data: a\n\nda", []string{"|a"}, errCut},
	} {
		r := newSSEReader(strings.NewReader(tc.in), 1<<10)
		var got []string
		var err error
		for {
			var ev string
			var data []byte
			var cut bool
			ev, data, cut, err = r.next()
			if err != nil {
				break
			}
			s := ev + "|" + string(data)
			if cut {
				s += "!"
			}
			got = append(got, s)
		}
		want := tc.err
		if want == nil {
			want = io.EOF
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || !errors.Is(err, want) || (want == io.EOF && err != io.EOF) {
			t.Errorf("%q: %q, %v; want %q, %v", tc.in, got, err, tc.want, want)
		}
	}
}

// TestSSEReaderBounds: a line or an event past the bound is errSSE, also
// when it spans several reads of the buffer; one within it is read whole.
func TestSSEReaderBounds(t *testing.T) {
	const max = 200 << 10 // more than the read buffer
	ok := "data: " + strings.Repeat("a", max-10) + "\n\n"
	if _, data, _, err := newSSEReader(strings.NewReader(ok), max).next(); err != nil || len(data) != max-10 {
		t.Fatalf("a line within the bound: %d bytes, %v", len(data), err)
	}
	long := "data: " + strings.Repeat("a", max+10) + "\n\n"
	if _, _, _, err := newSSEReader(strings.NewReader(long), max).next(); !errors.Is(err, errSSE) {
		t.Fatalf("a line past the bound: %v", err)
	}
	many := strings.Repeat("data: "+strings.Repeat("b", 1000)+"\n", 300) + "\n"
	if _, _, _, err := newSSEReader(strings.NewReader(many), max).next(); !errors.Is(err, errSSE) {
		t.Fatalf("an event past the bound: %v", err)
	}
}

// recorder records frames as "kind:delta" strings (the runtime's writer
// is exercised against JetStream by the package's pipeline tests).
type recorder struct {
	frames []string
	meta   map[string]any
}

var _ agent.Writer = (*recorder)(nil)

func (r *recorder) Chunk(kind string, d any) error {
	if td, ok := d.(e2a.ToolDelta); ok {
		d = td.ID + td.Name + fmt.Sprint(td.Args)
	}
	r.frames = append(r.frames, fmt.Sprintf("%s:%v", kind, d))
	return nil
}
func (r *recorder) Complete(res any) error {
	b, _ := json.Marshal(res)
	r.frames = append(r.frames, "complete:"+string(b))
	return nil
}
func (r *recorder) Fail(code, msg string, _ bool) error {
	r.frames = append(r.frames, "fail:"+code)
	return nil
}
func (r *recorder) Write(kind, _ string, _ any, _ bool) error {
	r.frames = append(r.frames, kind)
	return nil
}
func (r *recorder) SetMetadata(m map[string]any) error { r.meta = m; return nil }
func (r *recorder) ResumeAfter() int64                 { return -1 }
func (r *recorder) Sync() error                        { return nil }

func chunkLine(delta string, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `data: {"id":"c1","model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + "}]}\n\n"
}

// TestToolCallsWhenWhole: a call streamed whole before the next index
// starts is written at once (before the text that follows); interleaved
// calls wait for the finish reason and are written whole, in index order.
func TestToolCallsWhenWhole(t *testing.T) {
	tool := func(i int, id, name, args string) string {
		return fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%q,"function":{"name":%q,"arguments":%q}}]}`, i, id, name, args)
	}
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"sequential", chunkLine(tool(0, "a", "f", `{"x":`), "") + chunkLine(tool(0, "", "", `1}`), "") +
			chunkLine(tool(1, "b", "g", `{}`), "") + chunkLine(`{"content":"t"}`, "") + chunkLine(`{}`, "tool_calls"),
			[]string{`tool:af{"x":1}`, "text:t", "tool:bg{}"}},
		{"interleaved", chunkLine(tool(0, "a", "f", `{"x":`), "") + chunkLine(tool(1, "b", "g", `{"y":`), "") +
			chunkLine(`{"content":"t"}`, "") + chunkLine(tool(0, "", "", `1}`), "") + chunkLine(tool(1, "", "", `2}`), "") +
			chunkLine(`{}`, "tool_calls"),
			[]string{"text:t", `tool:af{"x":1}`, `tool:bg{"y":2}`}},
		{"no id, no index order", chunkLine(`{"tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}`, "stop"),
			[]string{"tool:call_0f{}"}},
	} {
		w := &recorder{}
		tr := &turn{w: w, maxEvent: 1 << 20}
		if err := tr.read(context.Background(), strings.NewReader(tc.in)); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if fmt.Sprint(w.frames) != fmt.Sprint(tc.want) || w.meta[MetadataResponseID] != "c1" {
			t.Errorf("%s: frames %q meta %v, want %q", tc.name, w.frames, w.meta, tc.want)
		}
	}
}

// TestParallelToolCallsApart: parallel calls that servers do not number
// one index each are never merged: without an index (Gemini's
// OpenAI-compatible endpoint, each call whole or its arguments split over
// chunks), with index 0 for every call (some proxies), with or without
// ids. A fragment with a new id, or naming a function whose arguments
// start a second JSON value, is the next call; one without an id continues
// the last call; two fragments of one chunk are two calls. A second value
// that nothing tells apart from the call's own arguments is a protocol
// error, never concatenated.
func TestParallelToolCallsApart(t *testing.T) {
	frag := func(index, id, name, args string) string {
		f := fmt.Sprintf(`{"id":%q,"type":"function","function":{"name":%q,"arguments":%q}}`, id, name, args)
		if index != "" {
			f = `{"index":` + index + `,` + f[1:]
		}
		return f
	}
	tools := func(frags ...string) string {
		return chunkLine(`{"tool_calls":[`+strings.Join(frags, ",")+`]}`, "")
	}
	for _, tc := range []struct {
		name, in string
		want     []string
		code     string // the error's, "" none
	}{
		{"no index, each call whole", tools(frag("", "call_a", "get_weather", `{"city":"London"}`)) +
			tools(frag("", "call_b", "get_time", `{"tz":"UTC"}`)) + chunkLine(`{}`, "stop"),
			[]string{`tool:call_aget_weather{"city":"London"}`, `tool:call_bget_time{"tz":"UTC"}`}, ""},
		{"no index, arguments split", tools(frag("", "call_a", "f", `{"x":`)) + tools(frag("", "", "", `1}`)) +
			tools(frag("", "call_b", "g", `{"y":`)) + tools(frag("", "", "", ` 2}`)) + chunkLine(`{}`, "stop"),
			[]string{`tool:call_af{"x":1}`, `tool:call_bg{"y": 2}`}, ""},
		{"no index, the id on every fragment", tools(frag("", "call_a", "f", `{"x":`)) + tools(frag("", "call_a", "", `1}`)) +
			chunkLine(`{}`, "stop"),
			[]string{`tool:call_af{"x":1}`}, ""},
		{"no index, no ids, one chunk", tools(frag("", "", "f", `{}`), frag("", "", "g", `{"y":2}`)) + chunkLine(`{}`, "stop"),
			[]string{"tool:call_0f{}", `tool:call_1g{"y":2}`}, ""},
		{"no index, no ids, a chunk each", tools(frag("", "", "f", `{"x":1}`)) + tools(frag("", "", "g", `{"y":2}`)) +
			chunkLine(`{}`, "stop"),
			[]string{`tool:call_0f{"x":1}`, `tool:call_1g{"y":2}`}, ""},
		{"index 0 for every call, each whole", tools(frag("0", "call_a", "f", `{"x":1}`)) +
			tools(frag("0", "call_b", "g", `{"y":2}`)) + chunkLine(`{}`, "tool_calls"),
			[]string{`tool:call_af{"x":1}`, `tool:call_bg{"y":2}`}, ""},
		{"index 0 for every call, arguments split", tools(frag("0", "call_a", "f", "")) + tools(frag("0", "", "", `{"x":`)) +
			tools(frag("0", "", "", `1}`)) + tools(frag("0", "call_b", "f", "")) + tools(frag("0", "", "", `{"x":2}`)) +
			chunkLine(`{}`, "tool_calls"),
			[]string{`tool:call_af{"x":1}`, `tool:call_bf{"x":2}`}, ""},
		{"index 0 for every call, a new id before the last is whole", tools(frag("0", "call_a", "f", `{"x":`)) +
			tools(frag("0", "call_b", "g", `{"y":2}`)) + chunkLine(`{}`, "tool_calls"),
			[]string{`tool:call_af{"x":`, `tool:call_bg{"y":2}`}, ""},
		{"index 0 for every call, no ids", tools(frag("0", "", "f", `{"x":1}`)) + tools(frag("0", "", "g", `{"y":2}`)) +
			chunkLine(`{}`, "tool_calls"),
			[]string{`tool:call_0f{"x":1}`, `tool:call_0_1g{"y":2}`}, ""},
		{"a second value without id or name", tools(frag("0", "call_a", "f", `{"x":1}`)) + tools(frag("0", "", "", `{"y":2}`)) +
			chunkLine(`{}`, "tool_calls"),
			nil, bridge.CodeProtocol},
		{"a second value without index, id or name", tools(frag("", "", "f", `{"x":1}`)) + tools(frag("", "", "", `{"y":2}`)) +
			chunkLine(`{}`, "tool_calls"),
			nil, bridge.CodeProtocol},
	} {
		w := &recorder{}
		tr := &turn{w: w, maxEvent: 1 << 20}
		err := tr.read(context.Background(), strings.NewReader(tc.in))
		var be *bridge.Error
		if tc.code != "" {
			if !errors.As(err, &be) || be.Code != tc.code || be.Retryable {
				t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if fmt.Sprint(w.frames) != fmt.Sprint(tc.want) {
			t.Errorf("%s: frames %q\nwant %q", tc.name, w.frames, tc.want)
		}
	}
}

// TestStreamCut: a stream that ends inside a line (an answer delimited by
// the connection's close, as Python's http.server sends it, reads as a
// clean end) was cut, not wrong: an event whose last line is cut and does
// not decode, or a cut line that is not a field, is upstream_unavailable,
// retryable. A last line that is whole without its line feed is read;
// one that is whole JSON but no chunk stays a protocol error.
func TestStreamCut(t *testing.T) {
	hel := chunkLine(`{"content":"Hel"}`, "")
	for _, tc := range []struct {
		name, in string
		code     string // "" : the turn ends well
	}{
		{"mid data line", hel + `data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"lo"`, bridge.CodeUnavailable},
		{"mid a field's name", hel + "da", bridge.CodeUnavailable},
		{"mid an error event", hel + "event: error\ndata: {\"error\":{\"message\":\"ov", bridge.CodeUnavailable},
		{"mid [DONE]", hel + chunkLine(`{}`, "stop") + "data: [DON", bridge.CodeUnavailable},
		{"mid a second data line", hel + `data: {"id":"c1",` + "\ndata: \"model", bridge.CodeUnavailable},
		{"[DONE] without its line feed", hel + chunkLine(`{}`, "stop") + "data: [DONE]", ""},
		{"a last chunk without its line feed", hel + strings.TrimSuffix(chunkLine(`{}`, "stop"), "\n\n"), ""},
		{"a whole last line, not a chunk", hel + `data: {"choices":"no"}`, bridge.CodeProtocol},
		{"a whole line, not a field", hel + "not sse\n\n" + chunkLine(`{}`, "stop"), bridge.CodeProtocol},
	} {
		w := &recorder{}
		tr := &turn{w: w, maxEvent: 1 << 20}
		err := tr.read(context.Background(), strings.NewReader(tc.in))
		if tc.code == "" {
			if err != nil || tr.finish != "stop" {
				t.Errorf("%s: %v, finish %q", tc.name, err, tr.finish)
			}
			continue
		}
		var be *bridge.Error
		if !errors.As(err, &be) || be.Code != tc.code || be.Retryable != (tc.code == bridge.CodeUnavailable) {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
		if len(w.frames) == 0 || w.frames[0] != "text:Hel" {
			t.Errorf("%s: frames %q", tc.name, w.frames)
		}
	}
}

// TestEmptyDataEvents: an event whose data is empty or blank ("data:"
// then a blank line, as some servers send to keep a stream alive) is not
// dispatched, as httpagent's reader skips it: the turn reads on.
func TestEmptyDataEvents(t *testing.T) {
	in := chunkLine(`{"content":"Hi"}`, "") + "data:\n\n" + "data: \r\n\r\n" + "event: error\ndata:\n\n" +
		chunkLine(`{"content":"!"}`, "") + "data:\ndata:\n\n" + chunkLine(`{}`, "stop") + "data:\n\n" + "data: [DONE]\n\n"
	w := &recorder{}
	tr := &turn{w: w, maxEvent: 1 << 20}
	if err := tr.read(context.Background(), strings.NewReader(in)); err != nil {
		t.Fatalf("empty data events: %v", err)
	}
	if fmt.Sprint(w.frames) != "[text:Hi text:!]" || !tr.done || tr.finish != "stop" {
		t.Fatalf("frames %q, done %v, finish %q", w.frames, tr.done, tr.finish)
	}
}

// TestStreamErrors: an error object in the stream, in each form servers
// send it, maps to the bridge's code.
func TestStreamErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{"error":{"message":"m","type":"server_error","code":null}}`:                      bridge.CodeUnavailable,
		`{"error":{"message":"m","type":"requests","code":"rate_limit_exceeded"}}`:         bridge.CodeRateLimited,
		`{"error":{"message":"m","type":"invalid_request_error","code":"context_length"}}`: bridge.CodeRejected,
		`{"object":"error","message":"m","type":"BadRequestError","code":400}`:             bridge.CodeRejected,
		`{"error":{"message":"m","code":503}}`:                                             bridge.CodeUnavailable,
		`{"error":"overloaded"}`:                                                           bridge.CodeUnavailable,
		`{"error":{"message":"content filtered","type":"content_filter"}}`:                 bridge.CodeFailed,
	} {
		tr := &turn{w: &recorder{}, maxEvent: 1 << 20}
		err := tr.read(context.Background(), strings.NewReader("data: "+in+"\n\n"))
		var be *bridge.Error
		if !errors.As(err, &be) || be.Code != want {
			t.Errorf("%s: %v, want %s", in, err, want)
		}
	}
}

// TestQuotesScrubbedBeforeCut: every error that quotes the upstream's
// words cut short (an error event's message at 200 characters, a line or
// an event that is not a chunk at 60) takes the client's credentials out
// before the cut: the Handler's scrub of the message, after it, no longer
// finds a key cut in two, whose start the client would see.
func TestQuotesScrubbedBeforeCut(t *testing.T) {
	const key = "sk-cut-0123456789abcdef"
	scrub := func(s string) string { return strings.ReplaceAll(s, key, "[redacted]") }
	for name, in := range map[string]string{
		"error event message": "data: " + `{"error":{"message":"` + strings.Repeat("a", 182) + " Bearer " + key + `","code":401}}` + "\n\n",
		"event not a chunk":   "data: " + strings.Repeat("x", 42) + " Bearer " + key + "\n\n",
		"line not SSE":        strings.Repeat("y", 42) + " Bearer " + key + "\n\n",
		"event cut":           "data: {" + strings.Repeat("z", 41) + " Bearer " + key,
	} {
		tr := &turn{w: &recorder{}, maxEvent: 1 << 20, scrub: scrub}
		err := tr.read(context.Background(), strings.NewReader(in))
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		// Cut after the first 10 characters of the key, were it not
		// taken out first.
		if msg := err.Error(); strings.Contains(msg, key[:4]) {
			t.Errorf("%s: %q; want the key redacted before the message is cut", name, msg)
		}
	}
}

// FuzzTurn: any bytes as a stream end the turn with nil or an error, never
// a panic, and every error is the bridge's or a read error; every frame
// written is one the runtime takes (agenttest.Writer checks them).
func FuzzTurn(f *testing.F) {
	addFiles(f, "testdata/*.sse")
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":-1}]}}]}\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		w := &agenttest.Writer{}
		tr := &turn{w: w, maxEvent: 1 << 10}
		err := tr.read(context.Background(), strings.NewReader(string(b)))
		if errors.Is(err, e2a.ErrInvalidResponse) || w.AfterFinal() > 0 {
			t.Fatalf("a frame the runtime refuses, or one after the final frame: %v, %q", err, w.Kinds())
		}
		if err == nil {
			if err := tr.flushCalls(); errors.Is(err, e2a.ErrInvalidResponse) {
				t.Fatalf("a tool call the runtime refuses: %v", err)
			}
			_ = tr.result()
			return
		}
		var be *bridge.Error
		if !errors.As(err, &be) {
			t.Fatalf("error %v is not a bridge error", err)
		}
	})
}

// TestUserText: the text of each front door's envelope: A2A's text parts
// (params.text), E2A's content or query, ACP's prompt text blocks, joined.
func TestUserText(t *testing.T) {
	for want, params := range map[string]map[string]any{
		"a2a":      {"text": "a2a", "content": "not this"},
		"e2a":      {"content": "e2a"},
		"query":    {"query": "query"},
		"one\ntwo": {"prompt": []any{map[string]any{"type": "text", "text": "one"}, map[string]any{"type": "image", "data": "x"}, map[string]any{"type": "text", "text": "two"}}},
		"":         {"prompt": "not blocks", "attachments": []any{}},
		// Spec §11.5: E2A's multimodal request holds its text in
		// content_blocks alone (a thought block is not the user's).
		"Describe this image": {"content_blocks": []any{map[string]any{"type": "text", "text": "Describe this image"},
			map[string]any{"type": "text", "text": "hidden", "_meta": map[string]any{"thought": true}},
			map[string]any{"type": "image", "mime_type": "image/png", "data": "iVBO"}}},
		"the prompt": {"prompt": []any{map[string]any{"type": "text", "text": "the prompt"}},
			"content_blocks": []any{map[string]any{"type": "text", "text": "not these"}}},
	} {
		if got := UserText(&e2a.Envelope{Params: params}); got != want {
			t.Errorf("%v: %q, want %q", params, got, want)
		}
	}
}

// TestUserContentOfContentBlocks: spec §11.5's request (session/prompt,
// its text and image in params.content_blocks, no prompt) reaches the
// model as its text and image: it was refused, "the request holds no
// text, image, audio or tool result for the model".
func TestUserContentOfContentBlocks(t *testing.T) {
	env, err := e2a.FromJSON([]byte(`{"method":"session/prompt","session_id":"s1","jsonrpc_id":1,"params":{"content_blocks":[` +
		`{"type":"text","text":"Describe this image"},{"type":"image","mime_type":"image/png","data":"iVBO"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := userContent(env)
	want := []contentPart{{Type: "text", Text: "Describe this image"}, {Type: "image_url", ImageURL: &imageURL{URL: "data:image/png;base64,iVBO"}}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("userContent = %#v, %v; want %#v", got, err, want)
	}
}

// FuzzWholeAnswer: any bytes answered as one JSON object give the stream
// that carries them or a bridge error, never a panic; the stream is one
// turn.read takes to its end ([DONE]) or refuses with a bridge error, and
// every frame it writes is one the runtime takes.
func FuzzWholeAnswer(f *testing.F) {
	addFiles(f, "testdata/*.json")
	f.Add([]byte(`{"choices":[{"message":{"tool_calls":[{"function":{"arguments":7}}]}}]}`))
	f.Add([]byte(`{"error":"overloaded"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := wholeAnswer(bytes.NewReader(b), 1<<12, false, nil)
		var be *bridge.Error
		if err != nil {
			if !errors.As(err, &be) {
				t.Fatalf("error %v is not a bridge error", err)
			}
			return
		}
		w := &agenttest.Writer{}
		tr := &turn{w: w, maxEvent: 1 << 12} // the bound wholeAnswer read with
		err = tr.read(context.Background(), r)
		if errors.Is(err, e2a.ErrInvalidResponse) || w.AfterFinal() > 0 {
			t.Fatalf("a frame the runtime refuses, or one after the final frame: %v, %q", err, w.Kinds())
		}
		if err != nil && !errors.As(err, &be) {
			t.Fatalf("error %v is not a bridge error", err)
		}
		if err == nil && !tr.done {
			t.Fatalf("the stream of %q did not end with [DONE]", b)
		}
	})
}

// addFiles seeds f with every file matching pattern (the fixtures).
func addFiles(f *testing.F, pattern string) {
	files, _ := filepath.Glob(pattern)
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}
