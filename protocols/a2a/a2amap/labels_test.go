package a2amap_test

import (
	"maps"
	"reflect"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

// TestArtifactMetadataLabels: the artifact and part metadata of content
// frames (artifact_metadata, artifact_part_metadata:
// conformance.LabeledTextFrames) reach the artifact and its text parts as
// an A2A client folds the stream (Mapper.Events, appended updates'
// metadata merged, as a2a-go's task manager merges them) and as the task
// holds them (BuildTask behind tasks/get, TaskBuilder, the Aggregator's
// Task behind a blocking send): artifact "M" with its first frame's
// metadata and a later frame's merged in, each of its text parts with the
// part metadata, the reasoning part (in history once the turn completed)
// with it beside thought. Artifact "R", which no frame gives metadata,
// has none.
func TestArtifactMetadataLabels(t *testing.T) {
	frames := conformance.LabeledTextFrames()
	wantMeta := maps.Clone(conformance.LabelMetadata())
	maps.Copy(wantMeta, conformance.LabelMetadataLater())
	wantThought := maps.Clone(conformance.PartLabelMetadata())
	wantThought["thought"] = true
	check := func(how string, arts map[a2a.ArtifactID]*a2a.Artifact, thoughts []*a2a.Part) {
		t.Helper()
		m := arts["M"]
		if m == nil {
			t.Fatalf("%s: no artifact M in %v", how, arts)
		}
		if !reflect.DeepEqual(map[string]any(m.Metadata), wantMeta) || m.Name != "Notes" {
			t.Errorf("%s: artifact M %q metadata %v, want Notes %v", how, m.Name, m.Metadata, wantMeta)
		}
		text := ""
		for i, p := range m.Parts {
			text += p.Text()
			if !reflect.DeepEqual(map[string]any(p.Metadata), conformance.PartLabelMetadata()) {
				t.Errorf("%s: artifact M part %d metadata %v, want %v", how, i, p.Metadata, conformance.PartLabelMetadata())
			}
		}
		if text != "m1 m2 m3" {
			t.Errorf("%s: artifact M text %q", how, text)
		}
		if r := arts["R"]; r == nil || r.Metadata != nil || r.Parts[0].Metadata != nil {
			t.Errorf("%s: artifact R %+v, want no metadata", how, r)
		}
		if len(thoughts) != 1 || !reflect.DeepEqual(map[string]any(thoughts[0].Metadata), wantThought) {
			t.Errorf("%s: reasoning parts %+v, want one with metadata %v", how, thoughts, wantThought)
		}
	}
	// The stream, folded as a client folds it.
	mp := a2amap.NewStreamMapper("req-fast", a2amap.Params{TaskID: "task-1", ContextID: "ctx-1"}, 0)
	arts := map[a2a.ArtifactID]*a2a.Artifact{}
	var thoughts []*a2a.Part
	for _, f := range frames {
		evs, err := mp.Events(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			u, ok := ev.(*a2a.TaskArtifactUpdateEvent)
			if !ok {
				continue
			}
			if u.Artifact.ID == "T" {
				thoughts = append(thoughts, u.Artifact.Parts...)
				continue
			}
			a := arts[u.Artifact.ID]
			if a == nil || !u.Append {
				c := *u.Artifact
				c.Parts, c.Metadata = nil, maps.Clone(u.Artifact.Metadata)
				arts[c.ID], a = &c, &c
			} else if len(u.Artifact.Metadata) > 0 {
				if a.Metadata == nil {
					a.Metadata = map[string]any{}
				}
				maps.Copy(a.Metadata, u.Artifact.Metadata)
			}
			a.Parts = append(a.Parts, u.Artifact.Parts...)
		}
	}
	check("stream", arts, thoughts)

	req := turnRequest("req-fast", frames...)
	taskArts := func(task *a2a.Task) (map[a2a.ArtifactID]*a2a.Artifact, []*a2a.Part) {
		out := map[a2a.ArtifactID]*a2a.Artifact{}
		for _, a := range task.Artifacts {
			out[a.ID] = a
		}
		var th []*a2a.Part
		for _, m := range task.History {
			for _, p := range m.Parts {
				if p.Metadata["thought"] == true {
					th = append(th, p)
				}
			}
		}
		return out, th
	}
	checkTask := func(how string, task *a2a.Task) {
		t.Helper()
		arts, thoughts := taskArts(task)
		check(how, arts, thoughts)
	}
	task := a2amap.BuildTask("task-1", "ctx-1", []a2amap.Request{req}, nil)
	checkTask("BuildTask", task)
	built, res := builtEachWay(t, task, req, frames)
	checkTask("TaskBuilder", built)
	checkTask("Aggregator", res)
}

// TestArtifactMetadataMakesTask: a blocking send whose one answer is a
// text chunk with artifact metadata answers with the Task, whose
// artifact carries it, not with a Message (which could not).
func TestArtifactMetadataMakesTask(t *testing.T) {
	frames := conformance.LabeledTextFrames()
	one := frames[5] // "m2 ": part metadata only
	one.Metadata = maps.Clone(one.Metadata)
	agg := a2amap.NewAggregator("req-fast", a2amap.Params{})
	_ = agg.Add(one)
	_ = agg.Add(frames[len(frames)-1])
	if msg, ok := agg.Result(nil).(*a2a.Message); !ok || !reflect.DeepEqual(map[string]any(msg.Parts[0].Metadata), conformance.PartLabelMetadata()) {
		t.Errorf("part metadata only: %#v, want a Message whose part has %v", agg.Result(nil), conformance.PartLabelMetadata())
	}
	one.Metadata[a2amap.MetaArtifactMetadata] = conformance.LabelMetadata()
	agg = a2amap.NewAggregator("req-fast", a2amap.Params{})
	_ = agg.Add(one)
	_ = agg.Add(frames[len(frames)-1])
	task, ok := agg.Result(nil).(*a2a.Task)
	if !ok || len(task.Artifacts) != 1 || !reflect.DeepEqual(map[string]any(task.Artifacts[0].Metadata), conformance.LabelMetadata()) {
		t.Errorf("artifact metadata: %#v, want the Task whose artifact has %v", agg.Result(nil), conformance.LabelMetadata())
	}
}
