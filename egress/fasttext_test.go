package egress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
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
