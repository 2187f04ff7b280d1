package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
)

// TestSSEReader: events as the SSE format defines them: LF or CRLF line
// ends, data lines joined, comments, id and retry skipped, a last event
// without its blank line; any other line is errSSE.
func TestSSEReader(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // event|data
		err  bool
	}{
		{"data: a\n\ndata: b\n\n", []string{"|a", "|b"}, false},
		{"data: a\r\n\r\ndata:b\r\n\r\n", []string{"|a", "|b"}, false},
		{": keep-alive\n\nid: 1\nretry: 10\ndata: x\ndata: y\n\n", []string{"|x\ny"}, false},
		{"event: error\ndata: {}\n\ndata: z", []string{"error|{}", "|z"}, false},
		{"\n\n\n", nil, false},
		{"data: a\n\nnot sse\n\n", []string{"|a"}, true},
		{"{\"id\":1}\n", nil, true},
	} {
		r := newSSEReader(strings.NewReader(tc.in), 1<<10)
		var got []string
		var err error
		for {
			var ev string
			var data []byte
			ev, data, err = r.next()
			if err != nil {
				break
			}
			got = append(got, ev+"|"+string(data))
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || (tc.err != errors.Is(err, errSSE)) || (!tc.err && err != io.EOF) {
			t.Errorf("%q: %q, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestSSEReaderBounds: a line or an event past the bound is errSSE, also
// when it spans several reads of the buffer; one within it is read whole.
func TestSSEReaderBounds(t *testing.T) {
	const max = 200 << 10 // more than the read buffer
	ok := "data: " + strings.Repeat("a", max-10) + "\n\n"
	if _, data, err := newSSEReader(strings.NewReader(ok), max).next(); err != nil || len(data) != max-10 {
		t.Fatalf("a line within the bound: %d bytes, %v", len(data), err)
	}
	long := "data: " + strings.Repeat("a", max+10) + "\n\n"
	if _, _, err := newSSEReader(strings.NewReader(long), max).next(); !errors.Is(err, errSSE) {
		t.Fatalf("a line past the bound: %v", err)
	}
	many := strings.Repeat("data: "+strings.Repeat("b", 1000)+"\n", 300) + "\n"
	if _, _, err := newSSEReader(strings.NewReader(many), max).next(); !errors.Is(err, errSSE) {
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

// FuzzTurn: any bytes as a stream end the turn with nil or an error, never
// a panic, and every error is the bridge's or a read error; every frame
// written is one the runtime takes (agenttest.Writer checks them).
func FuzzTurn(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.sse")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":-1}]}}]}\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		w := &agenttest.Writer{}
		tr := &turn{w: w, maxEvent: 1 << 10}
		err := tr.read(context.Background(), strings.NewReader(string(b)))
		if errors.Is(err, e2a.ErrInvalidResponse) || w.AfterFinal() > 0 {
			t.Fatalf("a frame the runtime refuses, or one after the final frame: %v, %q", err, w.Kinds())
		}
		if err == nil {
			if err := tr.flushCalls(-1); errors.Is(err, e2a.ErrInvalidResponse) {
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
	} {
		if got := UserText(&e2a.Envelope{Params: params}); got != want {
			t.Errorf("%v: %q, want %q", params, got, want)
		}
	}
}
