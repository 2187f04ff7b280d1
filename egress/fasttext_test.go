package egress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
)

// TestACPFastTextMatches: ACPTextUpdate writes what json.Marshal writes of
// the session/update notification of the frame's ACPUpdates (the general
// path of protocols/acp's renderer), for decoded frames and frames read
// without decode, with the session id given or taken from the frames; it
// declines every frame that is not a plain text chunk, and all of them
// when the fast paths are off.
func TestACPFastTextMatches(t *testing.T) {
	frames := TextFrames()
	for i, f := range frames {
		f.SessionID = "sess-<" + fmt.Sprint(i%2) + ">"
	}
	texts := 0
	for _, session := range []string{"", "s&1"} {
		for _, f := range frames {
			raw, _ := json.Marshal(f)
			want := session
			if want == "" {
				want = f.SessionID
			}
			var general []byte
			if ups, _ := ACPUpdates(f); len(ups) == 1 && ups[0].AgentMessageChunk != nil && f.ResponseKind == e2a.KindChunk {
				general, _ = json.Marshal(jsonrpc.Notification{JSONRPC: "2.0", Method: e2a.ACPSessionUpdate,
					Params: acp.SessionNotification{SessionId: acp.SessionId(want), Update: ups[0]}})
			}
			for _, lazy := range []bool{false, true} {
				fr := &Frame{Response: f, Raw: raw, StreamSeq: 1}
				if lazy {
					fr = &Frame{Raw: raw, StreamSeq: 1, seq: f.Sequence, final: f.IsFinal, rkind: f.ResponseKind}
				}
				b, used, ok := ACPTextUpdate(fr, session)
				if !ok {
					continue
				}
				texts++
				if used != want || !bytes.Equal(b, general) {
					t.Fatalf("session %q lazy %v: session %q\nfast:    %s\ngeneral: %s", session, lazy, used, b, general)
				}
			}
		}
	}
	if texts == 0 {
		t.Fatal("no text update")
	}
	old := fastText
	fastText = false
	defer func() { fastText = old }()
	for _, f := range frames {
		raw, _ := json.Marshal(f)
		if _, _, ok := ACPTextUpdate(&Frame{Response: f, Raw: raw}, ""); ok {
			t.Fatal("a text update with the fast paths off")
		}
	}
}

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
