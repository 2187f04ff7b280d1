package egress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
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
