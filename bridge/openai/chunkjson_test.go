package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// fixtureChunks is the data of every event of the wire-format fixtures
// (testdata/*.sse) that is a chunk, and chunks of the shapes the servers
// the package names send (vLLM, Ollama, llama.cpp, DeepSeek, OpenRouter).
func fixtureChunks(t testing.TB) [][]byte {
	t.Helper()
	files, err := filepath.Glob("testdata/*.sse")
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures: %v", err)
	}
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok && d[0] == '{' {
				out = append(out, bytes.Clone(d))
			}
		}
	}
	return append(out,
		[]byte(`{"id":"chatcmpl-e2abench0001","object":"chat.completion.chunk","created":1767225600,"model":"bench-model","system_fingerprint":"fp_e2abench","choices":[{"index":0,"delta":{"content":"xxxxxxxxxx"},"logprobs":null,"finish_reason":null}],"usage":null}`),
		[]byte(`{"id":"cmpl-1","object":"chat.completion.chunk","created":1,"model":"qwen","choices":[{"index":0,"delta":{"reasoning":"hm"},"logprobs":null,"finish_reason":null,"stop_reason":null}]}`),
		[]byte(`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"llama3","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`),
		[]byte(` { "id" : "x" , "choices" : [ { "index" : 0 , "delta" : { "content" : "a\"b\u00e9\n" } } , { "index" : 1 , "delta" : { } } ] } `),
		[]byte(`{"object":"error","message":"overloaded","type":"server_error","code":503}`),
		[]byte(`{"error":{"message":"rate limited","type":"rate_limit_error","code":"429"}}`),
	)
}

// withoutSpares is c with its choices' spare content fields zeroed
// (where decodeChunk's fast path keeps a delta's content, and
// encoding/json never writes): what it decoded is compared through the
// deltas' pointers.
func withoutSpares(c chunk) chunk {
	if c.Choices != nil {
		c.Choices = slices.Clone(c.Choices)
		for i := range c.Choices {
			c.Choices[i].content = contentField{}
		}
	}
	return c
}

// FuzzDecodeChunk: decodeChunk gives what json.Unmarshal gives (the same
// chunk, an error exactly when it errs), whatever the input; the fast path
// is taken only where it agrees.
func FuzzDecodeChunk(f *testing.F) {
	for _, c := range fixtureChunks(f) {
		f.Add(c)
	}
	for _, s := range []string{`{"ID":"a"}`, `{"id":"a","id":"b"}`, `{"choices":[{"index":1.0}]}`, `{"choices":[{"index":-0}]}`,
		`{"choices":null}`, `{"choices":[null]}`, `{"choices":[]}`, `{"id":null,"usage":null}`, `{"id":5}`, `{"choices":[{"delta":null}]}`,
		`{"choices":[{"delta":{"content":null,"tool_calls":null}}]}`, `{"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}`,
		"{\"id\":\"\xff\"}", `{"\u0069d":"a"}`, `{"choices":[{"Index":3}]}`, "{\"\u212aey\":1}", `{"choices":[{"index":99999999999999999999}]}`,
		`[]`, `"x"`, `{"choices":{}}`, `{"choices":[{"finish_reason":5}]}`, `{"choices":[{"delta":{"reasoning_content":{"a":1}}}]}`,
		`{"choices":[{"delta":{"content":"\ud83d","refusal":"\ude00\ud83d\ude00\u00e9"}}]}`, "{\"choices\":[{\"delta\":{\"content\":\"\xe2\x82\",\"reasoning\":\"\xac\"}}]}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast, slow chunk
		ferr := decodeChunk(data, &fast)
		serr := json.Unmarshal(data, &slow)
		if (ferr == nil) != (serr == nil) {
			t.Fatalf("%q: decodeChunk error %v, json.Unmarshal %v", data, ferr, serr)
		}
		if serr == nil && !reflect.DeepEqual(withoutSpares(fast), slow) {
			t.Fatalf("%q:\ndecodeChunk    %+v\njson.Unmarshal %+v", data, fast, slow)
		}
		// Decoded into the chunk of an answer's previous event, whose
		// choices' array it reuses: the same.
		reused := chunk{Choices: []choice{{Index: 3, Delta: delta{Refusal: new(textFragment)}}, {Index: 1}}}
		if err := decodeChunk(data, &reused); (err == nil) != (serr == nil) || serr == nil && !reflect.DeepEqual(withoutSpares(reused), slow) {
			t.Fatalf("%q: decodeChunk into a used chunk %+v (%v), json.Unmarshal %+v (%v)", data, reused, err, slow, serr)
		}
		var c chunk
		if readChunk(data, &c, nil, []string{"x", "a"}) && (serr != nil || !reflect.DeepEqual(withoutSpares(c), slow)) {
			t.Fatalf("%q: fast path read %+v, json.Unmarshal %+v (%v)", data, c, slow, serr)
		}
	})
}

// TestFastPathReadsCommonChunks: every fixture chunk without tool calls
// (text, reasoning, usage, finish, errors) is read by the fast path. A
// content that is an array of parts (Mistral's reasoning models) is left
// to encoding/json, as tool calls are.
func TestFastPathReadsCommonChunks(t *testing.T) {
	n := 0
	for _, data := range fixtureChunks(t) {
		if bytes.Contains(data, []byte(`"tool_calls":[`)) || bytes.Contains(data, []byte(`"content":[`)) {
			continue
		}
		var c chunk
		if !readChunk(data, &c, nil, nil) {
			t.Errorf("fast path refused %s", data)
		}
		n++
	}
	if n < 20 {
		t.Fatalf("only %d chunks read", n)
	}
}

func BenchmarkDecodeChunk(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-e2abench0001","object":"chat.completion.chunk","created":1767225600,"model":"bench-model","system_fingerprint":"fp_e2abench","choices":[{"index":0,"delta":{"content":"` +
		string(bytes.Repeat([]byte("x"), 100)) + `"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	for _, bc := range []struct {
		name string
		dec  func([]byte, *chunk) error
	}{{"scan", func(d []byte, c *chunk) error { return decodeChunk(d, c, "chatcmpl-e2abench0001", "bench-model") }}, {"encoding-json", func(d []byte, c *chunk) error { return json.Unmarshal(d, c) }}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var c chunk
				if err := bc.dec(data, &c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
