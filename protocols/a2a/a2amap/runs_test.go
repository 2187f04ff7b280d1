package a2amap_test

import (
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

// TestTextRunBrokenByNamedArtifact: text chunks without llm_response_id
// on either side of a chunk of a named artifact (an A2A bridge's status
// messages around an artifact of the agent's) are two runs, two
// artifacts, in the stream as in the task (BuildTask, the Aggregator's
// Task): the stream appended the second run to the first one's
// artifact, the task had each its own.
func TestTextRunBrokenByNamedArtifact(t *testing.T) {
	frames := []*e2a.Response{
		conformance.Chunk("q1", 0, e2a.DeltaText, "working", ""),
		conformance.Chunk("q1", 1, e2a.DeltaText, "doc", "doc"),
		conformance.Chunk("q1", 2, e2a.DeltaText, "done", ""),
		conformance.Frame("q1", 3, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{}, nil),
	}
	// The stream, folded as a client folds artifact-updates.
	m := a2amap.NewStreamMapper("q1", a2amap.Params{TaskID: "task-1", ContextID: "ctx-1"}, 0)
	streamed := &a2a.Task{}
	for _, f := range frames {
		evs, err := m.Events(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			au, ok := ev.(*a2a.TaskArtifactUpdateEvent)
			if !ok {
				continue
			}
			i := slices.IndexFunc(streamed.Artifacts, func(a *a2a.Artifact) bool { return a.ID == au.Artifact.ID })
			if i < 0 {
				streamed.Artifacts = append(streamed.Artifacts, a2amap.UpdatedArtifact(nil, au.Artifact, au.Append))
			} else {
				streamed.Artifacts[i] = a2amap.UpdatedArtifact(streamed.Artifacts[i], au.Artifact, au.Append)
			}
		}
	}
	task := a2amap.BuildTask("task-1", "ctx-1", []a2amap.Request{turnRequest("q1", frames...)}, nil)
	got, want := artifactTexts(streamed), artifactTexts(task)
	if len(want) != 3 || !slices.Equal(got, want) {
		t.Errorf("streamed artifacts %q, task's %q; want the same three (two runs of text and doc)", got, want)
	}
	_, res := builtEachWay(t, task, turnRequest("q1", frames...), frames)
	if got := artifactTexts(res); !slices.Equal(got, want) {
		t.Errorf("Aggregator's artifacts %q, want %q", got, want)
	}
}
