package a2amap_test

import (
	"bytes"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

// TestAgentFinalStatusKeptInTask: an agent's own final status-update in a
// terminal state other than completed (an A2A upstream's rejected or
// failed, written as an a2a.stream_event frame) ends the task with its
// own status message, in the Task (tasks/get, message/send, push) as in
// the stream, whose final event it is. The Task's was a failure message
// made of its text alone: its data part and metadata gone, another id,
// and an error whose code was "".
func TestAgentFinalStatusKeptInTask(t *testing.T) {
	id := "req-own-end"
	msg := map[string]any{"messageId": "m-rej", "role": "agent", "metadata": map[string]any{"why": "policy"},
		"parts": []any{map[string]any{"kind": "text", "text": "no"}, map[string]any{"kind": "data", "data": map[string]any{"rule": 7.0}}}}
	for _, state := range []string{"rejected", "failed", "canceled"} {
		frames := []*e2a.Response{
			conformance.Chunk(id, 0, e2a.DeltaText, "thinking it over", ""),
			conformance.Frame(id, 1, e2a.KindA2AStreamEvent, e2a.StatusSucceeded, true, e2a.StreamEventBody{Branch: e2a.BranchStatusUpdate,
				Payload: map[string]any{"final": true, "status": map[string]any{"state": state, "message": msg}}}, nil),
		}
		p := a2amap.Params{TaskID: "task-1", ContextID: "ctx-1"}
		m := a2amap.NewStreamMapper(id, p, 0)
		var last *a2a.TaskStatusUpdateEvent
		for _, f := range frames {
			evs, err := m.Events(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if su, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
					last = su
				}
			}
		}
		agg := a2amap.NewAggregator(id, p)
		for _, f := range frames {
			if err := agg.Add(f); err != nil {
				t.Fatal(err)
			}
		}
		task := agg.Task(nil)
		if last == nil || last.Status.Message == nil || task.Status.Message == nil {
			t.Fatalf("%s: stream's final %+v, task's status %+v", state, last, task.Status)
		}
		stream, got := mustJSON(t, last.Status), mustJSON(t, task.Status)
		if !bytes.Equal(stream, got) || len(task.Status.Message.Parts) != 2 || task.Status.Message.ID != "m-rej" {
			t.Errorf("%s: the task's status\n %s\nwant the stream's final status, the agent's own\n %s", state, got, stream)
		}
	}
}
