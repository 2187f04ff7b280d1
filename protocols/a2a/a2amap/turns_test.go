package a2amap_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

// artifactFrame is request id's frame seq: an A2A artifact-update of
// artifact art with text (appended to the artifact of its id when app).
func artifactFrame(id string, seq int64, art, text string, app bool) *e2a.Response {
	return conformance.Frame(id, seq, e2a.KindA2AStreamEvent, e2a.StatusInProgress, false, e2a.StreamEventBody{Branch: e2a.BranchArtifactUpdate,
		Payload: map[string]any{"artifact": map[string]any{"artifact_id": art, "parts": []any{map[string]any{"text": text}}}, "append": app}}, nil)
}

func turnRequest(id string, frames ...*e2a.Response) a2amap.Request {
	return a2amap.Request{Envelope: &e2a.Envelope{RequestID: id, Params: map[string]any{"text": "q " + id}}, Frames: frames}
}

// artifactTexts is each artifact of t as id=text of its parts.
func artifactTexts(t *a2a.Task) []string {
	var out []string
	for _, art := range t.Artifacts {
		s := string(art.ID) + "="
		for _, p := range art.Parts {
			if text, ok := p.Content.(a2a.Text); ok {
				s += string(text)
			}
		}
		out = append(out, s)
	}
	return out
}

// TestBuildTaskKeepsEveryTurnsArtifacts: a task's artifacts are those of
// all its turns, merged by id in the order first seen as A2A's
// artifact-update says (a2a-go's task manager likewise): a later turn's
// update of an id replaces that artifact in its place, or adds its parts
// with append; only the last turn's reply becomes an artifact (an earlier
// turn's stays in history). TaskBuilder, for the last turn after the
// earlier ones, builds the same task.
func TestBuildTaskKeepsEveryTurnsArtifacts(t *testing.T) {
	done := func(id string, seq int64, result string) *e2a.Response {
		return conformance.Frame(id, seq, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: result}, nil)
	}
	q1 := turnRequest("q1", artifactFrame("q1", 0, "draft", "v1", false), artifactFrame("q1", 1, "notes", "a", false), done("q1", 2, "first reply"))
	q2 := turnRequest("q2", artifactFrame("q2", 0, "notes", "b", true), artifactFrame("q2", 1, "draft", "v2", false),
		artifactFrame("q2", 2, "final", "f", false), done("q2", 3, "last reply"))
	task := a2amap.BuildTask("task-1", "ctx-1", []a2amap.Request{q1, q2}, nil)
	got := artifactTexts(task)
	// The result of the last turn, which streamed no content, is the
	// artifact its stream names: its request id (no llm_response_id).
	want := []string{"draft=v2", "notes=ab", "final=f", "q2=last reply"}
	if len(got) != len(want) {
		t.Fatalf("artifacts %q, want %q", got, want)
	}
	m := a2amap.NewStreamMapper("q2", a2amap.Params{TaskID: "task-1", ContextID: "ctx-1"}, 0)
	var streamed a2a.ArtifactID
	for _, f := range q2.Frames {
		evs, err := m.Events(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if au, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok && au.LastChunk {
				streamed = au.Artifact.ID
			}
		}
	}
	if streamed != "q2" {
		t.Errorf("the stream's result artifact %q, want %q (GetTask's)", streamed, "q2")
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("artifacts %q, want %q", got, want)
		}
	}
	b := a2amap.NewTaskBuilder("task-1", "ctx-1", []a2amap.Request{q1}, q2.Envelope)
	for _, f := range q2.Frames {
		if err := b.Add(f); err != nil {
			t.Fatal(err)
		}
	}
	built, _ := json.Marshal(b.Task())
	rebuilt, _ := json.Marshal(task)
	if !bytes.Equal(built, rebuilt) {
		t.Fatalf("TaskBuilder:\n%s\nBuildTask:\n%s", built, rebuilt)
	}
	// The first turn alone: its reply is the artifact then.
	if got := artifactTexts(a2amap.BuildTask("task-1", "ctx-1", []a2amap.Request{q1}, nil)); len(got) != 3 || got[2] != "q1=first reply" {
		t.Fatalf("first turn's artifacts %q", got)
	}
}

// TestBuildTaskStateOfQueuedTurn: a task's turn that waits without a
// frame behind an earlier turn that has not ended (turns run one after
// another) leaves the task in that turn's state (working), not submitted;
// behind a turn that has ended, or one that has written nothing yet, the
// task is submitted.
func TestBuildTaskStateOfQueuedTurn(t *testing.T) {
	running := turnRequest("q1", conformance.Chunk("q1", 0, e2a.DeltaText, "one", ""))
	ended := turnRequest("q1", conformance.Chunk("q1", 0, e2a.DeltaText, "one", ""),
		conformance.Frame("q1", 1, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: "one"}, nil))
	for _, c := range []struct {
		name string
		reqs []a2amap.Request
		want a2a.TaskState
	}{
		{"behind a running turn", []a2amap.Request{running, turnRequest("q2"), turnRequest("q3")}, a2a.TaskStateWorking},
		{"behind an ended turn", []a2amap.Request{ended, turnRequest("q2")}, a2a.TaskStateSubmitted},
		{"behind a turn without frames", []a2amap.Request{turnRequest("q1"), turnRequest("q2")}, a2a.TaskStateSubmitted},
		{"running", []a2amap.Request{ended, turnRequest("q2", conformance.Chunk("q2", 0, e2a.DeltaText, "two", ""))}, a2a.TaskStateWorking},
	} {
		task := a2amap.BuildTask("task-1", "ctx-1", c.reqs, nil)
		if task.Status.State != c.want {
			t.Errorf("%s: state %s, want %s", c.name, task.Status.State, c.want)
		}
		// The builder of the last turn, before its first frame, says the same.
		n := len(c.reqs) - 1
		if st := a2amap.NewTaskBuilder("task-1", "ctx-1", c.reqs[:n], c.reqs[n].Envelope).Status(); len(c.reqs[n].Frames) == 0 && st.State != c.want {
			t.Errorf("%s: TaskBuilder state %s, want %s", c.name, st.State, c.want)
		}
	}
}

// TestBuildTaskUserMessageReferenceTasks: the user message BuildTask puts
// in a task's history keeps the referenceTaskIds the client sent, which
// the normalizer keeps in params.reference_task_ids (an envelope read
// from JSON), in A2A v1.0 (GetTask) and v0.3 (tasks/get, V03Task).
func TestBuildTaskUserMessageReferenceTasks(t *testing.T) {
	var env e2a.Envelope
	if err := json.Unmarshal([]byte(`{"request_id":"q1","message_id":"m1","params":{"text":"about it","reference_task_ids":["task-0"]}}`), &env); err != nil {
		t.Fatal(err)
	}
	task := a2amap.BuildTask("task-1", "ctx-1", []a2amap.Request{{Envelope: &env}}, nil)
	if len(task.History) != 1 || task.History[0].ID != "m1" || len(task.History[0].ReferenceTasks) != 1 || task.History[0].ReferenceTasks[0] != "task-0" {
		t.Fatalf("v1.0 history %+v: want m1 with referenceTaskIds [task-0]", task.History)
	}
	old := a2amap.V03Task(task)
	if len(old.History) != 1 || len(old.History[0].ReferenceTasks) != 1 || old.History[0].ReferenceTasks[0] != "task-0" {
		t.Fatalf("v0.3 history %+v: want referenceTaskIds [task-0]", old.History)
	}
}

// TestContentArtifactsAsStreamed: a completed request's text is the
// artifacts a stream carries for it (Mapper.Events: each chunk an update
// of the artifact of its llm_response_id): the text of each id joined in
// order though the ids interleave, with the agent's own artifact between
// them, in the order first seen, the name a frame gives the artifact
// (MetaArtifactName), thoughts in history; in BuildTask, TaskBuilder
// (and its v0.3 JSON) and the Aggregator's Task alike. While the request
// runs, its text is in history and the artifacts are the agent's own.
func TestContentArtifactsAsStreamed(t *testing.T) {
	named := conformance.Chunk("q1", 5, e2a.DeltaText, "b2", "B")
	named.Metadata[a2amap.MetaArtifactName] = "Bee"
	frames := []*e2a.Response{
		conformance.Chunk("q1", 0, e2a.DeltaText, "a1 ", "A"),
		conformance.Chunk("q1", 1, e2a.DeltaReasoning, "think", "A"),
		conformance.Chunk("q1", 2, e2a.DeltaText, "b1 ", "B"),
		artifactFrame("q1", 3, "N", "n", false),
		conformance.Chunk("q1", 4, e2a.DeltaText, "a2", "A"),
		named,
		conformance.Frame("q1", 6, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{}, nil),
	}
	q1 := turnRequest("q1", frames...)
	want := []string{"A=a1 a2", "B=b1 b2", "N=n"}
	check := func(how string, task *a2a.Task, want []string, history int) {
		t.Helper()
		if got := artifactTexts(task); !slices.Equal(got, want) {
			t.Errorf("%s: artifacts %q, want %q", how, got, want)
		}
		if len(task.History) != history {
			t.Errorf("%s: %d history messages, want %d", how, len(task.History), history)
		}
	}
	task := a2amap.BuildTask("task-1", "ctx-1", []a2amap.Request{q1}, nil)
	// The user message and the thought.
	check("BuildTask", task, want, 2)
	if task.Artifacts[1].Name != "Bee" || task.Artifacts[0].Name != "" {
		t.Errorf("artifact names %q, %q: want B named Bee", task.Artifacts[0].Name, task.Artifacts[1].Name)
	}
	if len(task.Artifacts[0].Parts) != 1 {
		t.Errorf("artifact A has %d parts, want its text in one", len(task.Artifacts[0].Parts))
	}
	_, res := builtEachWay(t, task, q1, frames)
	check("Aggregator", res, want, 1) // the thought (no user message)
	running := turnRequest("q1", frames[:len(frames)-1]...)
	// The user message and the four content messages (A, B, A, B: the
	// ids interleave).
	check("running", a2amap.BuildTask("task-1", "ctx-1", []a2amap.Request{running}, nil), []string{"N=n"}, 5)
}

// builtEachWay builds the task of req (its frames, one turn of task-1 in
// ctx-1) incrementally, with a TaskBuilder and with an Aggregator, and
// checks the builder's against task (BuildTask's) and its v0.3 encoding
// against V03Task's; it returns the builder's task and the Aggregator's
// result, which must be a Task.
func builtEachWay(t *testing.T, task *a2a.Task, req a2amap.Request, frames []*e2a.Response) (built, aggregated *a2a.Task) {
	t.Helper()
	b := a2amap.NewTaskBuilder("task-1", "ctx-1", nil, req.Envelope)
	agg := a2amap.NewAggregator(req.Envelope.RequestID, a2amap.Params{TaskID: "task-1", ContextID: "ctx-1"})
	for _, f := range frames {
		_ = b.Add(f)
		_ = agg.Add(f)
	}
	got, _ := json.Marshal(b.Task())
	want, _ := json.Marshal(task)
	if !bytes.Equal(got, want) {
		t.Errorf("TaskBuilder:\n%s\nBuildTask:\n%s", got, want)
	}
	v03, err := b.MarshalV03Task(nil)
	if want, _ := json.Marshal(a2amap.V03Task(b.Task())); err != nil || !bytes.Equal(v03, want) {
		t.Errorf("MarshalV03Task %s (%v), want %s", v03, err, want)
	}
	res, ok := agg.Result(nil).(*a2a.Task)
	if !ok {
		t.Fatalf("Result %T, want the Task", agg.Result(nil))
	}
	return b.Task(), res
}
