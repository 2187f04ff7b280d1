package a2a

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
)

// renderStream renders frames with the A2A SSE renderer, the text fast
// path on or off, the frames decoded or (lazy) as a reader without decode
// gives them.
func renderStream(t *testing.T, fast, lazy bool, id json.RawMessage, from int64, frames []*e2a.Response) []byte {
	t.Helper()
	old := fastText
	fastText = fast
	defer func() { fastText = old }()
	rec := httptest.NewRecorder()
	o := egress.NewOutput(rec, time.Second)
	rend := NewStream(o, frames[0].RequestID, a2amap.Params{JSONRPCID: id, TaskID: "task-<1>", ContextID: "ctx &1",
		Submitted: egress.ConformanceTime(), Interaction: true}, from)
	if err := rend.Start(); err != nil {
		t.Fatal(err)
	}
	for i, f := range frames {
		raw, _ := json.Marshal(f)
		fr := &egress.Frame{Response: f, Raw: raw, StreamSeq: uint64(i + 1)}
		if lazy {
			var err error
			if fr, err = egress.HeadFrame(raw, uint64(i+1)); err != nil {
				t.Fatal(err)
			}
		}
		if err := rend.Frame(fr); err != nil {
			t.Fatal(err)
		}
	}
	return rec.Body.Bytes()
}

// TestA2AFastTextMatches: the text fast path writes byte for byte what the
// general path (event struct, json.Marshal) writes, for hostile texts and
// ids, runs of text split by reasoning and tool chunks, with and without
// llm_response_id, and resumed streams.
func TestA2AFastTextMatches(t *testing.T) {
	frames := textFrames()
	for _, id := range []string{`"req-002"`, `7`, `"<id>&"`, ``, `1.5e3`} {
		for _, from := range []int64{0, 3} {
			slow := renderStream(t, false, false, json.RawMessage(id), from, frames)
			for _, lazy := range []bool{false, true} {
				fast := renderStream(t, true, lazy, json.RawMessage(id), from, frames)
				if !bytes.Equal(fast, slow) {
					t.Fatalf("id %s from %d lazy %v:\nfast:\n%s\nslow:\n%s", id, from, lazy, fast, slow)
				}
			}
			if !bytes.Contains(slow, []byte(`\u003cb\u003e`)) {
				t.Fatalf("the hostile text is missing:\n%s", slow)
			}
		}
	}
}

// chunkFrame and frameAt make frames as egress's conformance scenarios
// do (egress.Scenarios), for the tests of this package's own cases.
func chunkFrame(id string, seq int64, dk string, delta any, llm string) *e2a.Response {
	var meta map[string]any
	if llm != "" {
		meta = map[string]any{a2amap.MetaLLMResponseID: llm}
	}
	return frameAt(id, seq, e2a.KindChunk, e2a.StatusInProgress, false, e2a.ChunkBody{DeltaKind: dk, Delta: delta}, meta)
}

func frameAt(id string, seq int64, kind, status string, final bool, body any, meta map[string]any) *e2a.Response {
	return &e2a.Response{
		ProtocolVersion: "1.0", ResponseID: fmt.Sprintf("rsp-%s-%d", id, seq), RequestID: id,
		Sequence: seq, IsFinal: final, Status: status, ResponseKind: kind,
		Timestamp:  e2a.FormatTime(egress.ConformanceTime().Add(time.Duration(seq) * time.Second)),
		Provenance: e2a.Provenance{SourceProtocol: e2a.SourceA2A},
		Body:       e2a.MarshalBody(body), Metadata: meta,
		TaskID: "task-002", ContextID: "ctx-001", SessionID: "s1", JSONRPCID: json.RawMessage(`"req-002"`),
	}
}

// textFrames is a request's frames with hostile texts, runs of text split
// by reasoning and tool chunks, with and without llm_response_id, odd
// metadata, a numeric delta and the final frame.
func textFrames() []*e2a.Response {
	texts := []string{"Hello", " world", "", `"quoted" \ back`, "<b>&amp;</b>", "\u2028\u2029", "bad \xff utf8", "tab\tnl\n", "🙂 中文"}
	var frames []*e2a.Response
	seq := int64(0)
	add := func(f *e2a.Response) { f.Sequence = seq; seq++; frames = append(frames, f) }
	for i, txt := range texts {
		llm := ""
		if i%3 == 2 {
			llm = fmt.Sprintf("chatcmpl-%d", i/3)
		}
		add(chunkFrame("req-fast", 0, e2a.DeltaText, txt, llm))
		if i%4 == 3 {
			add(chunkFrame("req-fast", 0, e2a.DeltaReasoning, "thinking "+txt, ""))
		}
		if i == 5 {
			add(chunkFrame("req-fast", 0, e2a.DeltaTool, map[string]any{"type": "function_call", "id": "c1", "name": "f", "args": "{}"}, ""))
		}
	}
	// llm_response_id that is not a string, or under another case, is no
	// llm_response_id (metadata is a map: exact keys).
	odd := chunkFrame("req-fast", 0, e2a.DeltaText, "odd meta", "")
	odd.Metadata = map[string]any{a2amap.MetaLLMResponseID: 5, "LLM_RESPONSE_ID": "upper"}
	add(odd)
	// A numeric delta and a non-string one take the general path.
	add(chunkFrame("req-fast", 0, e2a.DeltaText, json.Number("42"), ""))
	add(frameAt("req-fast", 0, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": "done"}}, nil))
	for i, f := range frames {
		f.ResponseID = fmt.Sprintf("rsp-%d", i)
	}
	return frames
}

// BenchmarkStreamText: the A2A SSE renderer writing a plain text chunk
// read without decode (the text fast path), per frame.
func BenchmarkStreamText(b *testing.B) {
	f := chunkFrame("req-bench", 1, e2a.DeltaText, strings.Repeat("token ", 16), "")
	raw, _ := json.Marshal(f)
	o := egress.NewOutput(httptest.NewRecorder(), time.Second)
	rend := NewStream(o, "req-bench", a2amap.Params{JSONRPCID: json.RawMessage(`"req-1"`), TaskID: "task-1", ContextID: "ctx-1"}, 0)
	head, err := egress.HeadFrame(raw, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		fr := new(egress.Frame)
		*fr = *head
		fr.StreamSeq = uint64(i + 1)
		if err := rend.Frame(fr); err != nil {
			b.Fatal(err)
		}
		if i%1024 == 0 {
			o = egress.NewOutput(httptest.NewRecorder(), time.Second)
			rend.(*stream).o = o
		}
	}
}
