package egress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// renderA2AStream renders frames with the A2A SSE renderer, the text fast
// path on or off.
func renderA2AStream(t *testing.T, fast, lazy bool, id json.RawMessage, from int64, frames []*e2a.Response) []byte {
	t.Helper()
	return renderWith(t, fast, lazy, frames, func(o *Output) Renderer {
		return NewA2AStream(o, frames[0].RequestID, A2AParams{JSONRPCID: id, TaskID: "task-<1>", ContextID: "ctx &1", Submitted: fixedNow, Interaction: true}, from)
	})
}

// renderWith renders frames with the renderer mk makes, the text fast paths
// on or off, the frames decoded or (lazy) as a reader without decode gives
// them.
func renderWith(t *testing.T, fast, lazy bool, frames []*e2a.Response, mk func(*Output) Renderer) []byte {
	t.Helper()
	old := fastText
	fastText = fast
	defer func() { fastText = old }()
	rec := httptest.NewRecorder()
	o := NewOutput(rec, time.Second)
	rend := mk(o)
	if err := rend.Start(); err != nil {
		t.Fatal(err)
	}
	for i, f := range frames {
		raw, _ := json.Marshal(f)
		fr := &Frame{Response: f, Raw: raw, StreamSeq: uint64(i + 1)}
		if lazy {
			// As a reader without decode gives it: the head only.
			fr = &Frame{Raw: raw, StreamSeq: uint64(i + 1), seq: f.Sequence, final: f.IsFinal, rkind: f.ResponseKind}
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
			slow := renderA2AStream(t, false, false, json.RawMessage(id), from, frames)
			for _, lazy := range []bool{false, true} {
				fast := renderA2AStream(t, true, lazy, json.RawMessage(id), from, frames)
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

// TestACPFastTextMatches: ACPTextUpdate writes what json.Marshal writes of
// the session/update notification of the frame's ACPUpdates (the general
// path of protocols/acp's renderer), for decoded frames and frames read
// without decode, with the session id given or taken from the frames; it
// declines every frame that is not a plain text chunk, and all of them
// when the fast paths are off.
func TestACPFastTextMatches(t *testing.T) {
	frames := textFrames()
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
	odd.Metadata = map[string]any{MetaLLMResponseID: 5, "LLM_RESPONSE_ID": "upper"}
	add(odd)
	// A numeric delta and a non-string one take the general path.
	add(chunkFrame("req-fast", 0, e2a.DeltaText, json.Number("42"), ""))
	add(frameAt("req-fast", 0, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"content": "done"}}, nil))
	for i, f := range frames {
		f.ResponseID = fmt.Sprintf("rsp-%d", i)
	}
	return frames
}
