package a2amap_test

import (
	"reflect"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
)

// TestUpdatedArtifact: an artifact-update applied as A2A applies it
// (a2a-go's task manager likewise). With append, the update's parts come
// after the artifact's and its metadata is merged over the artifact's, in
// a new map; the artifact keeps its name and description. Without append,
// or for an artifact not seen yet, the update replaces it whole, a copy
// whose parts a later append grows without changing the update's.
func TestUpdatedArtifact(t *testing.T) {
	text := func(s string) *a2a.Part { return a2a.NewTextPart(s) }
	first := &a2a.Artifact{ID: "a", Name: "report", Description: "what was found",
		Parts: a2a.ContentParts{text("one ")}, Metadata: map[string]any{"k": "v1", "keep": true}}

	got := a2amap.UpdatedArtifact(nil, first, true)
	if got == first || !reflect.DeepEqual(got, first) {
		t.Fatalf("an append to no artifact: %+v, want a copy of the update", got)
	}
	oldMeta := got.Metadata
	got = a2amap.UpdatedArtifact(got, &a2a.Artifact{ID: "a", Name: "other", Parts: a2a.ContentParts{text("two")},
		Metadata: map[string]any{"k": "v2"}}, true)
	want := &a2a.Artifact{ID: "a", Name: "report", Description: "what was found",
		Parts: a2a.ContentParts{text("one "), text("two")}, Metadata: map[string]any{"k": "v2", "keep": true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after an append: %+v, want %+v", got, want)
	}
	if !reflect.DeepEqual(oldMeta, map[string]any{"k": "v1", "keep": true}) || len(first.Parts) != 1 {
		t.Errorf("the append changed the first update: metadata %v, %d parts", oldMeta, len(first.Parts))
	}
	if again := a2amap.UpdatedArtifact(got, &a2a.Artifact{ID: "a", Parts: a2a.ContentParts{text("!")}}, true); again.Metadata["k"] != "v2" {
		t.Errorf("an append without metadata dropped the artifact's: %v", again.Metadata)
	}

	repl := &a2a.Artifact{ID: "a", Name: "new", Parts: a2a.ContentParts{text("whole")}}
	got = a2amap.UpdatedArtifact(got, repl, false)
	if got == repl || !reflect.DeepEqual(got, repl) {
		t.Fatalf("after a replacement: %+v, want a copy of %+v", got, repl)
	}
	got = a2amap.UpdatedArtifact(got, &a2a.Artifact{ID: "a", Parts: a2a.ContentParts{text(" more")}}, true)
	if len(repl.Parts) != 1 || len(got.Parts) != 2 {
		t.Errorf("an append to the replacement: %d parts, the update it copied %d, want 2 and 1", len(got.Parts), len(repl.Parts))
	}
}
