package a2a

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

// taskGolden compares v, indented, with testdata/<dir>/<name>.golden
// (-update rewrites it).
func taskGolden(t *testing.T, dir, name string, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if err := conformance.MatchGolden(conformance.GoldenPath(dir, name), b, *update); err != nil {
		t.Error(err)
	}
	return b
}

// finishedTasks calls fn, in a subtest per scenario, with the task of each
// finished scenario (one request, its frames from the start), as tasks/get
// rebuilds it.
func finishedTasks(t *testing.T, fn func(t *testing.T, name string, task *a2a.Task)) {
	for _, sc := range conformance.Scenarios() {
		if !sc.Final || sc.From > 0 {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			env := &e2a.Envelope{RequestID: sc.RequestID(), Params: map[string]any{"text": "question"}}
			fn(t, sc.Name, a2amap.V03Task(a2amap.BuildTask("task-002", "ctx-001", []a2amap.Request{{Envelope: env, Frames: sc.Frames}}, nil)))
		})
	}
}

// TestTasksGetGolden rebuilds the task of every finished scenario as
// A2A tasks/get answers it (a2amap.BuildTask) and compares it with
// testdata/a2a_task (the AgentVault view of the same tasks is
// testdata/agentvault_task). No part list is ever null: the reply text of
// every turn is in the task.
func TestTasksGetGolden(t *testing.T) {
	finishedTasks(t, func(t *testing.T, name string, task *a2a.Task) {
		if b := taskGolden(t, "a2a_task", name, task); strings.Contains(string(b), `"parts": null`) {
			t.Errorf("null parts in tasks/get:\n%s", b)
		}
	})
}

// TestTasksGetMultiTurnKeepsReplies: every earlier turn's reply keeps its
// text in history.
func TestTasksGetMultiTurnKeepsReplies(t *testing.T) {
	turn := func(id, text string) a2amap.Request {
		return a2amap.Request{Envelope: &e2a.Envelope{RequestID: id, Params: map[string]any{"text": "q " + id}}, Frames: []*e2a.Response{
			conformance.Chunk(id, 0, e2a.DeltaReasoning, "thinking "+id, ""),
			conformance.Chunk(id, 1, e2a.DeltaText, text, ""),
			conformance.Frame(id, 2, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: text}, nil)}}
	}
	task := a2amap.V03Task(a2amap.BuildTask("task-1", "ctx-1", []a2amap.Request{turn("q1", "reply one"), turn("q2", "reply two"), turn("q3", "reply three")}, nil))
	b, _ := json.Marshal(task)
	for _, want := range []string{"reply one", "reply two", "reply three", "thinking q1", "thinking q3"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("tasks/get lost %q: %s", want, b)
		}
	}
	if strings.Contains(string(b), `"parts":null`) {
		t.Errorf("null parts: %s", b)
	}
	taskGolden(t, "a2a_task", "multi_turn", task)
}

// TestBuildTaskAcrossRequests: a task of two requests, the second
// running, and of one finished request with historyLength 1.
func TestBuildTaskAcrossRequests(t *testing.T) {
	env1 := &e2a.Envelope{RequestID: "q1", Params: map[string]any{"text": "first"}}
	env2 := &e2a.Envelope{RequestID: "q2", MessageID: "u2", Params: map[string]any{"message": map[string]any{
		"message_id": "u2", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "second"}}}}}
	f1 := []*e2a.Response{conformance.Chunk("q1", 0, e2a.DeltaText, "one", ""), conformance.Frame("q1", 1, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: "one"}, nil)}
	f2 := []*e2a.Response{conformance.Chunk("q2", 0, e2a.DeltaText, "two", "")}
	task := a2amap.V03Task(a2amap.BuildTask("task-1", "ctx-1", []a2amap.Request{{Envelope: env1, Frames: f1}, {Envelope: env2, Frames: f2}}, nil))
	if task.Status.State != "working" || len(task.History) != 4 {
		t.Fatalf("task %+v", task)
	}
	if task.History[2].ID != "u2" || task.History[2].Role != "user" {
		t.Fatalf("user message %+v", task.History[2])
	}
	one := 1
	got := a2amap.V03Task(a2amap.BuildTask("task-1", "ctx-1", []a2amap.Request{{Envelope: env1, Frames: f1}}, &one))
	if len(got.History) != 1 || got.Status.State != "completed" || len(got.Artifacts) != 1 {
		t.Fatalf("finished task %+v", got)
	}
	// Every message keeps its text (the aggregate is sealed).
	if len(got.Artifacts[0].Parts) != 1 || got.Artifacts[0].Parts[0].(a2a.TextPart).Text != "one" {
		t.Fatalf("artifact parts %+v", got.Artifacts[0].Parts)
	}
	if len(task.History[1].Parts) == 0 {
		t.Fatalf("earlier reply without parts: %+v", task.History[1])
	}
}
