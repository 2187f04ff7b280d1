package egress

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestReadTextChunkAllocs: reading a plain text chunk from the frame's bytes
// allocates nothing (its strings are views of the bytes); the decoder's
// fallback, taken for a frame the scan declines, does not move the reader's
// own variables to the heap on the common path.
func TestReadTextChunkAllocs(t *testing.T) {
	for _, f := range TextFrames() {
		if f.ResponseKind != e2a.KindChunk || f.IsFinal {
			continue
		}
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
		var head headScan
		if n := testing.AllocsPerRun(100, func() { _ = head.decode(raw); _, _, _ = readTextChunk(hf) }); n != 0 {
			t.Errorf("head scan and readTextChunk(%s): %v allocations, want 0", raw, n)
		}
		return
	}
	t.Fatal("no plain text chunk among TextFrames")
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
