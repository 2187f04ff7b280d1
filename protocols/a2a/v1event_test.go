package a2a

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

// TestA2AV1StreamGolden pins the A2A v1.0 wire of a stream: each
// scenario's frames mapped to events after the Task the stream begins
// with (the mapper every A2A answer uses,
// with the trpc interaction extension declared and without: the events
// its client gets, FilterEvents, as the bindings filter them), A2A v1.0
// events written as the /a2a/v1 bindings send them, one
// StreamResponse per line (the result member of each JSON-RPC response, the
// data of each HTTP+JSON event): no kind discriminators, TASK_STATE_* enums, parts as
// members, no final flag. -update rewrites testdata/a2av1_stream.
func TestA2AV1StreamGolden(t *testing.T) {
	old := now
	now = conformance.Time
	defer func() { now = old }()
	for _, sc := range conformance.Scenarios() {
		if sc.From > 0 || len(sc.Frames) == 0 {
			continue
		}
		for _, interaction := range []bool{true, false} {
			name := sc.Name
			if !interaction {
				name += "_basic"
			}
			t.Run(name, func(t *testing.T) {
				p := A2AParams{TaskID: "task-002", ContextID: "ctx-001", Interaction: interaction,
					Task: submittedTask()}
				m := a2amap.NewStreamMapper(sc.RequestID(), p, 0)
				ts := conformance.Time()
				var out bytes.Buffer
				write := func(ev a2a.Event) {
					b, err := json.Marshal(a2a.StreamResponse{Event: ev})
					if err != nil {
						t.Fatal(err)
					}
					out.Write(b)
					out.WriteByte('\n')
				}
				write(m.OpeningTask(p, &ts)) // a task's stream begins with the Task
				for _, st := range sc.Steps {
					if st.Kind != "frame" {
						continue
					}
					evs, err := m.Events(sc.Frames[st.Frame])
					if err != nil {
						t.Fatal(err)
					}
					for _, ev := range FilterEvents(p, evs) { // what its client gets
						write(ev)
					}
				}
				testkit.Golden(t, filepath.Join("testdata", "a2av1_stream", name+".golden"), out.Bytes(), *update)
				for _, forbidden := range [][]byte{[]byte(`"kind"`), []byte(`"final"`), []byte(`"parts":null`)} {
					if bytes.Contains(out.Bytes(), forbidden) {
						t.Errorf("v1.0 wire carries %s", forbidden)
					}
				}
			})
		}
	}
}

// submittedTask is the task the goldens' streams open with, as
// Answers.A2ATurnTask builds it for a new task: the user's message in
// history, submitted.
func submittedTask() *a2a.Task {
	return &a2a.Task{ID: "task-002", ContextID: "ctx-001", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted},
		History: []*a2a.Message{{ID: "m-1", TaskID: "task-002", ContextID: "ctx-001", Role: a2a.MessageRoleUser,
			Parts: a2a.ContentParts{a2a.NewTextPart("hi")}}}}
}
