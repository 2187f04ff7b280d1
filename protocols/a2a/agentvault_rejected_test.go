package a2a

import (
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

// TestAgentVaultRejectionIsAMessage: a turn the agent ends rejected (its
// own final status-update, an A2A upstream's refusal of the task) is
// FAILED in the profile, which has no rejected state, and its reason is
// the assistant's last message, in the tasks/sendSubscribe stream (a
// task_message before the final task_status) and in tasks/get, as a
// failure's is. tasks/get had no word of it: the view carries no status
// message, and the stream said it in task_status only.
func TestAgentVaultRejectionIsAMessage(t *testing.T) {
	id := "req-rejected"
	sc := conformance.Scenario{Name: "rejected", Final: true, Frames: []*e2a.Response{
		conformance.Chunk(id, 0, e2a.DeltaText, "let me see", ""),
		conformance.Frame(id, 1, e2a.KindA2AStreamEvent, e2a.StatusSucceeded, true, e2a.StreamEventBody{Branch: e2a.BranchStatusUpdate,
			Payload: map[string]any{"final": true, "status": map[string]any{"state": "rejected",
				"message": map[string]any{"messageId": "m-no", "role": "agent", "parts": []any{map[string]any{"kind": "text", "text": "not allowed here"}}}}}}, nil),
	}}
	body := avRender(t, sc, 0)
	msgs, _ := avRebuilt(t, body)
	env := &e2a.Envelope{RequestID: id, Params: map[string]any{"text": "question"}}
	task := a2amap.V03Task(a2amap.BuildTask("task-002", "ctx-001", []a2amap.Request{{Envelope: env, Frames: sc.Frames}}, nil))
	av := AgentVaultTask(task, "")
	last := func(ms []AVMessage) string {
		if len(ms) == 0 || len(ms[len(ms)-1].Parts) == 0 {
			return ""
		}
		return ms[len(ms)-1].Parts[0].Content.(string)
	}
	if av.State != AVFailed || last(av.Messages) != "not allowed here" {
		t.Errorf("tasks/get: state %s, messages %s; want FAILED, the last one the rejection", av.State, mustJSON(av.Messages))
	}
	if last(msgs) != "not allowed here" || !strings.Contains(string(body), `"state":"FAILED"`) {
		t.Errorf("tasks/sendSubscribe: task_messages %s in\n%s\nwant the rejection last, then FAILED", mustJSON(msgs), body)
	}
	avStreamIsTask(t, sc, task)
}
