package a2aupstream

import (
	"errors"
	"fmt"
	"maps"
	"reflect"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Turn is what a client saw of one turn, its events folded as an A2A
// client folds them (artifact chunks appended by id, the states in
// order), so that a test can compare it with what a scenario sends
// ([Turn.Check]) whichever server or front door the events came through.
type Turn struct {
	Events  int             // events added
	States  []a2a.TaskState // every state seen, in order
	Status  string          // text of the last status message
	Task    a2a.TaskInfo    // the task (and context) of the last task event
	Message *a2a.Message    // a direct message answer
	// Said is the messages of the status-update events, in order.
	Said      []*a2a.Message
	Artifacts map[a2a.ArtifactID]*a2a.Artifact
	Chunks    map[a2a.ArtifactID]int  // artifact-update events per artifact
	LastChunk map[a2a.ArtifactID]bool // whether the last of them had lastChunk
}

// NewTurn returns an empty turn.
func NewTurn() *Turn {
	return &Turn{Artifacts: map[a2a.ArtifactID]*a2a.Artifact{}, Chunks: map[a2a.ArtifactID]int{}, LastChunk: map[a2a.ArtifactID]bool{}}
}

// Add folds one event (or a SendMessage result) into the turn.
func (t *Turn) Add(ev a2a.Event) {
	t.Events++
	switch e := ev.(type) {
	case *a2a.Message:
		t.Message = e
	case *a2a.Task:
		t.Task = e.TaskInfo()
		t.status(e.Status)
		for _, a := range e.Artifacts {
			t.Artifacts[a.ID] = a
		}
	case *a2a.TaskStatusUpdateEvent:
		t.Task = e.TaskInfo()
		t.status(e.Status)
		if e.Status.Message != nil {
			t.Said = append(t.Said, e.Status.Message)
		}
	case *a2a.TaskArtifactUpdateEvent:
		t.Task = e.TaskInfo()
		a := t.Artifacts[e.Artifact.ID]
		if a == nil || !e.Append {
			a = &a2a.Artifact{ID: e.Artifact.ID, Name: e.Artifact.Name, Description: e.Artifact.Description, Extensions: e.Artifact.Extensions}
			t.Artifacts[a.ID] = a
		}
		a.Parts = append(a.Parts, e.Artifact.Parts...)
		// An appended update's metadata is merged in (a2a-go's task
		// manager does so).
		if len(e.Artifact.Metadata) > 0 && a.Metadata == nil {
			a.Metadata = map[string]any{}
		}
		maps.Copy(a.Metadata, e.Artifact.Metadata)
		t.Chunks[a.ID]++
		t.LastChunk[a.ID] = e.LastChunk
	}
}

func (t *Turn) status(st a2a.TaskStatus) {
	t.States = append(t.States, st.State)
	if st.Message != nil {
		t.Status = TextOf(st.Message.Parts)
	}
}

// State is the last state seen (unspecified before any).
func (t *Turn) State() a2a.TaskState {
	if len(t.States) == 0 {
		return a2a.TaskStateUnspecified
	}
	return t.States[len(t.States)-1]
}

// Text is the text of an artifact's parts.
func (t *Turn) Text(id a2a.ArtifactID) string {
	if a := t.Artifacts[id]; a != nil {
		return TextOf(a.Parts)
	}
	return ""
}

// Check compares the turn with what the scenario of text sends (stream,
// tool, fail, reject, agent-cancel, artifact-meta, message, file or echo; the turns of ask, auth and slow have
// their own shape) and returns every difference, or nil. streamed also
// checks what only a stream shows: the chunks of the streamed text and
// the states from submitted.
func (t *Turn) Check(text string, streamed bool) error {
	name, body := Scenario(text)
	var errs []error
	want := map[a2a.ArtifactID]string{}
	state := a2a.TaskStateCompleted
	switch name {
	case Stream:
		want = map[a2a.ArtifactID]string{ThoughtArtifact: Thought(body), TextArtifact: StreamText(body)}
		errs = append(errs, t.checkStream(body, streamed)...)
	case Tool:
		want[TextArtifact] = ToolText(body)
		errs = append(errs, t.checkData(ToolCallArtifact, ToolCall(body), "function_call"), t.checkData(ToolResponseArtifact, ToolResponse(body), "function_response"))
	case Fail:
		state = a2a.TaskStateFailed
		if t.Status != FailText(body) {
			errs = append(errs, fmt.Errorf("status message %q, want %q", t.Status, FailText(body)))
		}
	case Reject, AgentCancel:
		text := RejectText(body)
		state = a2a.TaskStateRejected
		if name == AgentCancel {
			state, text = a2a.TaskStateCanceled, AgentCancelText(body)
		}
		if t.Status != text {
			errs = append(errs, fmt.Errorf("status message %q, want %q", t.Status, text))
		}
	case ArtifactMeta:
		want[MetaTextArtifact] = MetaText(body)
		errs = append(errs, t.checkMeta(body))
	case Message:
		if t.Message == nil || TextOf(t.Message.Parts) != MessageText(body) || t.Events != 1 {
			return fmt.Errorf("want one direct message %q, got %d events, message %+v", MessageText(body), t.Events, t.Message)
		}
		return nil
	case File:
		errs = append(errs, t.checkFiles(body))
	case Echo:
		want[EchoArtifact] = EchoText(text)
	default:
		return fmt.Errorf("a2aupstream: Check has no single-turn shape for scenario %s", name)
	}
	if t.State() != state {
		errs = append(errs, fmt.Errorf("states %v, want the last %s", t.States, state))
	}
	for id, w := range want {
		if got := t.Text(id); got != w {
			errs = append(errs, fmt.Errorf("artifact %s: %q, want %q", id, got, w))
		}
	}
	return errors.Join(errs...)
}

func (t *Turn) checkStream(body string, streamed bool) []error {
	var errs []error
	if th := t.Artifacts[ThoughtArtifact]; th == nil || len(th.Parts) != 1 || th.Parts[0].Metadata["thought"] != true {
		errs = append(errs, fmt.Errorf("thought artifact %+v, want one part with metadata thought=true", th))
	}
	errs = append(errs, t.checkData(DataArtifact, StreamData(), ""))
	if !streamed {
		return errs
	}
	if n := len(StreamChunks(body)); t.Chunks[TextArtifact] != n || !t.LastChunk[TextArtifact] {
		errs = append(errs, fmt.Errorf("text artifact in %d chunks (last %v), want %d ending with lastChunk", t.Chunks[TextArtifact], t.LastChunk[TextArtifact], n))
	}
	if len(t.States) < 3 || t.States[0] != a2a.TaskStateSubmitted || t.States[1] != a2a.TaskStateWorking {
		errs = append(errs, fmt.Errorf("states %v, want submitted, working … completed", t.States))
	}
	return errs
}

// checkMeta checks "artifact-meta:"'s artifacts: their metadata and their
// parts'.
func (t *Turn) checkMeta(body string) error {
	var errs []error
	for _, id := range []a2a.ArtifactID{MetaTextArtifact, MetaDataArtifact} {
		a := t.Artifacts[id]
		if a == nil {
			errs = append(errs, fmt.Errorf("artifact %s missing", id))
			continue
		}
		if !reflect.DeepEqual(map[string]any(a.Metadata), ArtifactMetadata(body)) {
			errs = append(errs, fmt.Errorf("artifact %s metadata %#v, want %#v", id, a.Metadata, ArtifactMetadata(body)))
		}
		for i, p := range a.Parts {
			if !reflect.DeepEqual(map[string]any(p.Metadata), PartMetadata(body)) {
				errs = append(errs, fmt.Errorf("artifact %s part %d metadata %#v, want %#v", id, i, p.Metadata, PartMetadata(body)))
			}
		}
	}
	if a := t.Artifacts[MetaTextArtifact]; a != nil && a.Name != MetaArtifactName {
		errs = append(errs, fmt.Errorf("artifact %s named %q, want %q", MetaTextArtifact, a.Name, MetaArtifactName))
	}
	return errors.Join(errs...)
}

func (t *Turn) checkData(id a2a.ArtifactID, want map[string]any, typ string) error {
	a := t.Artifacts[id]
	if a == nil || len(a.Parts) != 1 {
		return fmt.Errorf("artifact %s: %+v, want one DataPart", id, a)
	}
	if got := a.Parts[0].Data(); !reflect.DeepEqual(got, want) {
		return fmt.Errorf("artifact %s data %#v, want %#v", id, got, want)
	}
	if typ != "" && a.Parts[0].Metadata["type"] != typ {
		return fmt.Errorf("artifact %s part metadata %v, want type %s", id, a.Parts[0].Metadata, typ)
	}
	return nil
}

func (t *Turn) checkFiles(body string) error {
	b, u := t.Artifacts[FileBytesArtifact], t.Artifacts[FileURLArtifact]
	if b == nil || len(b.Parts) != 1 || string(b.Parts[0].Raw()) != string(FileBytes(body)) ||
		b.Parts[0].Filename != FileName || b.Parts[0].MediaType != FileMIME {
		return fmt.Errorf("file bytes artifact %+v", b)
	}
	if u == nil || len(u.Parts) != 1 || string(u.Parts[0].URL()) != FileURL(body) || u.Parts[0].MediaType != FileURLMIME {
		return fmt.Errorf("file URL artifact %+v, want %s", u, FileURL(body))
	}
	return nil
}
