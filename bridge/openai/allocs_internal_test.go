package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// nopWriter writes nothing: what reading the stream costs itself.
type nopWriter struct{ recorder }

func (*nopWriter) Chunk(string, any) error               { return nil }
func (*nopWriter) Complete(any) error                    { return nil }
func (*nopWriter) SetMetadata(map[string]any) error      { return nil }
func (*nopWriter) Write(string, string, any, bool) error { return nil }

// benchStream is an answer as `e2a bench --bridge openai`'s upstream
// streams it: a role chunk, content chunks, the finish, the usage, [DONE].
func benchStream(contents int) []byte {
	const head = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"m","system_fingerprint":"fp",`
	var b bytes.Buffer
	b.WriteString(head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	for range contents {
		b.WriteString(head + `"choices":[{"index":0,"delta":{"content":"` + strings.Repeat("x", 100) + `"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	}
	b.WriteString(head + `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}` + "\n\n")
	b.WriteString(head + `"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// TestReadAllocs: reading a streamed answer allocates per content chunk
// only what its text needs (the string, its content field, the text
// handed to the writer, the answer's builder growing); the chunk, its
// choices and the event's data are reused from one chunk to the next (7
// content chunks cost 70 allocations before, 6.6 per chunk).
func TestReadAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	read := func(contents int) float64 {
		stream := benchStream(contents)
		return testing.AllocsPerRun(50, func() {
			tr := &turn{w: &nopWriter{}, maxEvent: 1 << 20}
			if err := tr.read(context.Background(), bytes.NewReader(stream)); err != nil {
				t.Fatal(err)
			}
		})
	}
	none, seven := read(0), read(7)
	if per := (seven - none) / 7; per > 4 {
		t.Errorf("reading a content chunk: %v allocations (%v for 7, %v for none), want at most 4", per, seven, none)
	}
	if seven > 45 {
		t.Errorf("reading an answer of 7 content chunks: %v allocations, want at most 45", seven)
	}
}

// TestResultAllocs: the final frame's result is a struct, encoded as the
// map it was (the same bytes: its members in the map's order, usage and
// refusal only when there is one), in a few allocations (the map and its
// encoding were 15).
func TestResultAllocs(t *testing.T) {
	tr := &turn{w: &nopWriter{}, maxEvent: 1 << 20}
	if err := tr.read(context.Background(), bytes.NewReader(benchStream(1))); err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("x", 100)
	want := `{"result":{"content":"` + text + `","finish_reason":"stop","model":"m",` +
		`"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}}`
	if b, err := json.Marshal(e2a.CompleteBody{Result: tr.result()}); err != nil || string(b) != want {
		t.Errorf("final frame's body %s (%v), want %s", b, err, want)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = json.Marshal(e2a.CompleteBody{Result: tr.result()}) }); n > 3 && !raceEnabled {
		t.Errorf("the final frame's result: %v allocations, want at most 3", n)
	}
	tr.refusal.WriteString("<no>")
	tr.usage = nil
	want = `{"result":{"content":"` + text + `","finish_reason":"stop","model":"m","refusal":"\u003cno\u003e"}}`
	if b, err := json.Marshal(e2a.CompleteBody{Result: tr.result()}); err != nil || string(b) != want {
		t.Errorf("final frame's body %s (%v), want %s", b, err, want)
	}
}

// TestGraceAllocs: an answer whose [DONE] is already read when its finish
// reason is (the usage chunk and [DONE] following at once, as servers
// send them) arms no grace timer (its timer and function were 2
// allocations per call): nothing is left to wait for.
func TestGraceAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	stream := benchStream(7)
	read := func(endCall context.CancelCauseFunc) float64 {
		return testing.AllocsPerRun(50, func() {
			tr := &turn{w: &nopWriter{}, maxEvent: 1 << 20, endCall: endCall, grace: time.Minute}
			if err := tr.read(context.Background(), bytes.NewReader(stream)); err != nil || !tr.done {
				t.Fatal(err, tr.done)
			}
		})
	}
	without, with := read(nil), read(func(error) {})
	if with > without {
		t.Errorf("reading an answer whose [DONE] is at hand: %v allocations with a grace, %v without", with, without)
	}
}
