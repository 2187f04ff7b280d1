package a2av1

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

// renderStream renders frames with the JSON-RPC stream, the text fast
// path on or off, the frames decoded or (lazy) as a reader without decode
// gives them.
func renderStream(t *testing.T, fast, lazy, rest bool, id json.RawMessage, from int64, frames []*e2a.Response) []byte {
	t.Helper()
	old := fastText
	fastText = fast
	defer func() { fastText = old }()
	out, err := conformance.RenderFrames(func(o *render.Output) render.Renderer {
		p := a2amap.Params{TaskID: "task-<1>", ContextID: "ctx &1", Submitted: conformance.Time(), Interaction: true}
		if rest {
			return NewRESTStream(o, frames[0].RequestID, p, from)
		}
		return NewStream(o, frames[0].RequestID, p, id, from)
	}, frames, lazy)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStreamFastTextMatches: the text fast path writes byte for byte what
// the general path (a2amap's v1.0 event, json.Marshal)
// writes, for hostile texts and ids, runs of text split by reasoning and
// tool chunks, with and without llm_response_id, and resumed streams; on
// both bindings (REST: the HTTP+JSON one's events, without JSON-RPC).
func TestStreamFastTextMatches(t *testing.T) {
	frames := conformance.TextFrames()
	for _, id := range []string{`"req-002"`, `7`, `"<id>&"`, ``, `1.5e3`, `REST`} {
		rest := id == `REST`
		for _, from := range []int64{0, 3} {
			slow := renderStream(t, false, false, rest, json.RawMessage(id), from, frames)
			for _, lazy := range []bool{false, true} {
				fast := renderStream(t, true, lazy, rest, json.RawMessage(id), from, frames)
				if !bytes.Equal(fast, slow) {
					t.Fatalf("id %s from %d lazy %v:\nfast:\n%s\nslow:\n%s", id, from, lazy, fast, slow)
				}
			}
			if !bytes.Contains(slow, []byte(`\u003cb\u003e`)) || !bytes.Contains(slow, []byte(`"artifactUpdate"`)) {
				t.Fatalf("the hostile text is missing:\n%s", slow)
			}
		}
	}
}

// TestStreamFastTextLabeled: a text chunk that names its artifact
// (metadata artifact_name, artifact_description: the A2A bridge's first
// chunk of an agent's named artifact) or gives it or its part metadata
// (artifact_metadata, artifact_part_metadata) takes the general path,
// whose event carries them (the fast path's would not): both write the
// same bytes, on both bindings. A text that holds those keys in quotes
// changes nothing.
func TestStreamFastTextLabeled(t *testing.T) {
	frames := conformance.LabeledTextFrames()
	for _, rest := range []bool{false, true} {
		slow := renderStream(t, false, false, rest, json.RawMessage(`"req-1"`), 0, frames)
		for _, lazy := range []bool{false, true} {
			if fast := renderStream(t, true, lazy, rest, json.RawMessage(`"req-1"`), 0, frames); !bytes.Equal(fast, slow) {
				t.Fatalf("rest %v lazy %v:\nfast:\n%s\nslow:\n%s", rest, lazy, fast, slow)
			}
		}
		for _, want := range []string{`"name":"Report \u003c1\u003e"`, `"description":"What \"was\" found."`, `"description":"no id"`,
			`"metadata":{"labels":["a","b"],"source":"\u003cx\u003e"}`, `"metadata":{"n":2,"source":"later"}`, `"metadata":{"lang":"en"}`, `"metadata":{"lang":"en","thought":true}`} {
			if !bytes.Contains(slow, []byte(want)) {
				t.Fatalf("rest %v: %s is missing:\n%s", rest, want, slow)
			}
		}
	}
}
