package a2abridge

import (
	"encoding/json"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	a2alegacy "github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// writeNative writes parts of artifact id as an a2a.stream_event frame
// of branch artifact_update: the A2A v0.3 TaskArtifactUpdateEvent (the
// shape §12.5 gives a2a.* bodies) naming no task or context, which the
// pipeline's renderers give the pipeline's own. The artifact's name,
// description and extensions go with a frame without append, its
// metadata with every frame of an update that has some (an appended
// update's metadata is merged into the artifact's by an A2A client, as
// a2a-go's task manager merges it); appendTo says that the parts are
// appended to the frames of the artifact written before (without it, the
// frame is the artifact's first, or replaces it whole), last that they
// end it (lastChunk, the agent's update's). The event carries the
// metadata of the agent's artifact-update it writes (eventMeta).
func (t *turn) writeNative(id a2a.ArtifactID, a *a2a.Artifact, parts a2a.ContentParts, appendTo, last bool) error {
	art := &a2a.Artifact{ID: id, Parts: parts}
	if a != nil {
		art.Metadata = a.Metadata
		if !appendTo {
			art.Name, art.Description, art.Extensions = a.Name, a.Description, a.Extensions
		}
	}
	ev := a2av0.FromV1TaskArtifactUpdateEvent(&a2a.TaskArtifactUpdateEvent{Artifact: art, Append: appendTo, LastChunk: last, Metadata: t.eventMeta})
	return t.w.Write(e2a.KindA2AStreamEvent, e2a.StatusInProgress,
		e2a.StreamEventBody{Branch: e2a.BranchArtifactUpdate, Payload: ev}, false)
}

// nativeArtifact reads the artifact of a stored a2a.stream_event frame
// of branch artifact_update (nil for any other frame), and its append
// flag.
func nativeArtifact(f *e2a.Response) (*a2a.Artifact, bool, error) {
	if f.ResponseKind != e2a.KindA2AStreamEvent {
		return nil, false, nil
	}
	var body struct {
		Branch  string          `json:"branch"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(f.Body, &body); err != nil {
		return nil, false, fmt.Errorf("a2abridge: stored frame %d: %w", f.Sequence, err)
	}
	if body.Branch != e2a.BranchArtifactUpdate {
		return nil, false, nil
	}
	var ev a2alegacy.TaskArtifactUpdateEvent
	if err := json.Unmarshal(body.Payload, &ev); err != nil {
		return nil, false, fmt.Errorf("a2abridge: stored frame %d: %w", f.Sequence, err)
	}
	v1, err := a2av0.ToV1TaskArtifactUpdateEvent(&ev)
	if err != nil || v1.Artifact == nil {
		return nil, false, err
	}
	return v1.Artifact, v1.Append, nil
}
