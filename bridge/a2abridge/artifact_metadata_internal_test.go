package a2abridge

import (
	"context"
	"reflect"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/agenttest"
)

// metaWriter keeps the metadata each chunk was written under (the
// runtime's writer stamps it on the frame).
type metaWriter struct {
	*agenttest.Writer
	chunks []map[string]any
}

func (w *metaWriter) Chunk(kind string, delta any) error {
	w.chunks = append(w.chunks, w.Metadata())
	return w.Writer.Chunk(kind, delta)
}

// TestArtifactMetadataFrames: the chunk frames of an agent's text
// artifact carry its metadata (artifact_metadata) on its first chunk and
// on a chunk whose appended update changes it, never on one whose update
// has none or repeats it, and each text part's metadata
// (artifact_part_metadata) on every chunk of that part; a reasoning
// part's thought flag is the chunk's kind, not part metadata.
func TestArtifactMetadataFrames(t *testing.T) {
	w := &metaWriter{Writer: &agenttest.Writer{}}
	tn := &turn{u: &Upstream{}, env: &e2a.Envelope{RequestID: "q"}, w: w}
	text := func(s string, md map[string]any) *a2a.Part {
		p := a2a.NewTextPart(s)
		p.Metadata = md
		return p
	}
	en, fr := map[string]any{"lang": "en"}, map[string]any{"lang": "fr"}
	update := func(appendTo bool, name string, md map[string]any, p *a2a.Part) *a2a.TaskArtifactUpdateEvent {
		return &a2a.TaskArtifactUpdateEvent{TaskID: "t", ContextID: "c", Append: appendTo,
			Artifact: &a2a.Artifact{ID: "A", Name: name, Metadata: md, Parts: a2a.ContentParts{p}}}
	}
	for i, ev := range []a2a.Event{
		update(false, "N", map[string]any{"s": 1.0}, text("x", en)),
		update(true, "", nil, text("y", en)),
		update(true, "", map[string]any{"s": 2.0}, text("z", fr)),
		update(true, "", map[string]any{"s": 2.0}, text("w", nil)),
		update(true, "", nil, text("th", map[string]any{"thought": true})),
		update(true, "", nil, text("th2", map[string]any{"thought": true, "k": "v"})),
	} {
		if err := tn.event(context.Background(), ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	want := []map[string]any{
		{"llm_response_id": "A", "artifact_name": "N", "artifact_metadata": map[string]any{"s": 1.0}, "artifact_part_metadata": en},
		{"llm_response_id": "A", "artifact_part_metadata": en},
		{"llm_response_id": "A", "artifact_metadata": map[string]any{"s": 2.0}, "artifact_part_metadata": fr},
		{"llm_response_id": "A"},
		{"llm_response_id": "A"},
		{"llm_response_id": "A", "artifact_part_metadata": map[string]any{"k": "v"}},
	}
	if !reflect.DeepEqual(w.chunks, want) {
		t.Errorf("chunk metadata:\n%v\nwant\n%v", w.chunks, want)
	}
}
