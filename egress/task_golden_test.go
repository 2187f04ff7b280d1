package egress

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
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
	path := filepath.Join("testdata", dir, name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(b, want) {
		t.Errorf("differs from %s (run with -update after checking):\n--- got\n%s\n--- want\n%s", path, b, want)
	}
	return b
}

// TestTasksGetGolden rebuilds the task of every finished scenario as
// A2A tasks/get answers it and compares it with testdata/a2a_task (the
// AgentVault view of the same tasks is package protocols/a2a's,
// testdata/agentvault_task there). No part list is ever
// null: the reply text of every turn is in the task.
func TestTasksGetGolden(t *testing.T) {
	for _, sc := range Scenarios() {
		if !sc.Final || sc.From > 0 {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			env := &e2a.Envelope{RequestID: reqID(sc), Params: map[string]any{"text": "question"}}
			task := BuildA2ATask("task-002", "ctx-001", []A2ARequest{{Envelope: env, Frames: sc.Frames}}, nil)
			b := taskGolden(t, "a2a_task", sc.Name, task)
			if strings.Contains(string(b), `"parts": null`) {
				t.Errorf("null parts in tasks/get:\n%s", b)
			}
		})
	}
}

// TestTasksGetMultiTurnKeepsReplies: every earlier turn's reply keeps its
// text in history.
func TestTasksGetMultiTurnKeepsReplies(t *testing.T) {
	turn := func(id, text string) A2ARequest {
		return A2ARequest{Envelope: &e2a.Envelope{RequestID: id, Params: map[string]any{"text": "q " + id}}, Frames: []*e2a.Response{
			chunkFrame(id, 0, e2a.DeltaReasoning, "thinking "+id, ""),
			chunkFrame(id, 1, e2a.DeltaText, text, ""),
			frameAt(id, 2, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: text}, nil)}}
	}
	task := BuildA2ATask("task-1", "ctx-1", []A2ARequest{turn("q1", "reply one"), turn("q2", "reply two"), turn("q3", "reply three")}, nil)
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
