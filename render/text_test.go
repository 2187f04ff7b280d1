package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestReadTextChunkAllocs: reading a plain text chunk from the frame's bytes
// allocates nothing (its strings are views of the bytes); the decoder's
// fallback, taken for a frame the scan declines, does not move the reader's
// own variables to the heap on the common path.
func TestReadTextChunkAllocs(t *testing.T) {
	for _, f := range textChunks() {
		raw, _ := json.Marshal(f)
		fr := &Frame{Raw: raw, StreamSeq: 1, seq: f.Sequence, final: f.IsFinal, rkind: f.ResponseKind}
		if _, _, ok := readTextChunk(fr); !ok {
			continue
		}
		if n := testing.AllocsPerRun(100, func() { _, _, _ = readTextChunk(fr) }); n != 0 {
			t.Errorf("readTextChunk(%s): %v allocations, want 0", raw, n)
		}
		// As a reader gives it, with what its head scan read.
		hf, err := HeadFrame(raw, 1)
		if err != nil || !hf.text.ok {
			t.Fatalf("HeadFrame(%s): %+v, %v", raw, hf, err)
		}
		var head Head
		if n := testing.AllocsPerRun(100, func() { _ = head.Decode(raw); _, _, _ = readTextChunk(hf) }); n != 0 {
			t.Errorf("head scan and readTextChunk(%s): %v allocations, want 0", raw, n)
		}
		return
	}
	t.Fatal("no plain text chunk among textChunks")
}

// textChunks are plain text chunks as the agents write them, with and
// without llm_response_id, without escapes (package
// protocols/conformance's TextFrames has the hostile cases; this package
// cannot import it).
func textChunks() []*e2a.Response {
	var out []*e2a.Response
	for i, meta := range []map[string]any{nil, {metaLLMResponseID: "chatcmpl-1"}} {
		out = append(out, &e2a.Response{ProtocolVersion: "1.0", ResponseID: fmt.Sprintf("rsp-%d", i), RequestID: "req-text",
			Sequence: int64(i), Status: e2a.StatusInProgress, ResponseKind: e2a.KindChunk, Timestamp: "2025-01-23T10:30:00Z",
			Body: e2a.MarshalBody(e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: "Hello, world"}), Metadata: meta,
			TaskID: "task-002", ContextID: "ctx-001", SessionID: "s1"})
	}
	return out
}

// TestOutputScratchAllocs: SSE events and NDJSON lines are assembled in the
// output's scratch buffer, reused from one write to the next; one larger
// than MaxScratch is not kept.
func TestOutputScratchAllocs(t *testing.T) {
	o := NewOutput(&testkit.DiscardResponseWriter{}, 0)
	data := []byte(`{"sequence":12,"body":{"delta":"hello"}}`)
	_ = SSEEvent(o, "12", "", data)
	if n := testing.AllocsPerRun(100, func() { _ = SSEEvent(o, "12", "", data) }); n != 0 {
		t.Errorf("SSEEvent: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = WriteLine(o, data) }); n != 0 {
		t.Errorf("WriteLine: %v allocations, want 0", n)
	}
	_ = WriteLine(o, bytes.Repeat([]byte("x"), MaxScratch+1))
	if cap(o.scratch) > MaxScratch {
		t.Errorf("kept a %d-byte scratch buffer", cap(o.scratch))
	}
}

// a2aEventsOf collects frameA2AEvents over frames, the text fast path on
// or off, the frames decoded or (lazy) as a reader without decode gives
// them.

// BenchmarkTextChunkRead: what the A2A and ACP text fast paths spend per
// chunk frame: the reader's head scan, then the chunk read from what it
// kept (a frame built without the head's text is scanned again).
func BenchmarkTextChunkRead(b *testing.B) {
	chunk := textChunks()[1]
	chunk.Body = e2a.MarshalBody(e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: strings.Repeat("token ", 16)})
	data, err := json.Marshal(chunk)
	if err != nil {
		b.Fatal(err)
	}
	for _, keep := range []bool{true, false} {
		name := map[bool]string{true: "head-kept", false: "rescanned"}[keep]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			var h Head
			for b.Loop() {
				if err := h.Decode(data); err != nil {
					b.Fatal(err)
				}
				f := Frame{Raw: data, seq: h.Sequence, final: h.IsFinal, rkind: h.ResponseKind}
				if keep {
					f.text = h.text
				}
				if _, _, ok := readTextChunk(&f); !ok {
					b.Fatal("not a text chunk")
				}
			}
		})
	}
}
