package egress

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
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
func a2aEventsOf(t *testing.T, fast, lazy bool, from int64, frames []*e2a.Response) []a2a.Event {
	t.Helper()
	old := fastText
	fastText = fast
	defer func() { fastText = old }()
	m := a2amap.NewStreamMapper(frames[0].RequestID, a2amap.Params{TaskID: "task-<1>", ContextID: "ctx &1", Interaction: true}, from)
	var evs []a2a.Event
	for i, f := range frames {
		raw, _ := json.Marshal(f)
		fr := &Frame{Response: f, Raw: raw, StreamSeq: uint64(i + 1)}
		if lazy {
			var err error
			if fr, err = HeadFrame(raw, uint64(i+1)); err != nil {
				t.Fatal(err)
			}
		}
		if !frameA2AEvents(m, fr, func(ev a2a.Event, err error) bool {
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
			return true
		}) {
			t.Fatalf("frame %d: stopped", i)
		}
	}
	return evs
}

// TestA2AEventsFastTextMatches: the events A2AEvents (the A2A v1.0
// binding's stream) builds for plain text chunks from their bytes are the
// ones Mapper.Events builds, for hostile texts, runs of text split by
// reasoning and tool chunks, with and without llm_response_id, and resumed
// streams.
func TestA2AEventsFastTextMatches(t *testing.T) {
	frames := TextFrames()
	for _, from := range []int64{0, 3} {
		slow := a2aEventsOf(t, false, false, from, frames)
		for _, lazy := range []bool{false, true} {
			fast := a2aEventsOf(t, true, lazy, from, frames)
			if !reflect.DeepEqual(fast, slow) {
				f, _ := json.Marshal(fast)
				s, _ := json.Marshal(slow)
				t.Fatalf("from %d lazy %v:\nfast: %s\nslow: %s", from, lazy, f, s)
			}
		}
		if len(slow) < len(frames) {
			t.Fatalf("%d events for %d frames", len(slow), len(frames))
		}
	}
}
