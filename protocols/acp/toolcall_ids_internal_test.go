package acp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

// TestRendererIDlessToolCalls: ACP requires every tool_call's toolCallId,
// unique in the session, and a tool_call_update names the call it updates.
// A function_call without an id (an HTTP agent's, an A2A agent's data part)
// was rendered with toolCallId "", so two such calls were one to the client
// and their results could not be told apart. Now each id-less call gets an
// id of its request, frame and position; an id-less function_response ends
// the oldest open call of its name; one with no such call is shown as a
// call of its own, already ended. session/load's replay names them
// through the same openCalls.updates.
func TestRendererIDlessToolCalls(t *testing.T) {
	call := func(seq int64, name string) *e2a.Response {
		return conformance.Chunk("req1", seq, e2a.DeltaTool, map[string]any{"type": "function_call", "name": name, "args": "{}"}, "")
	}
	resp := func(seq int64, name string, response any) *e2a.Response {
		return conformance.Chunk("req1", seq, e2a.DeltaTool, map[string]any{"type": "function_response", "name": name, "response": response}, "")
	}
	frames := []*e2a.Response{
		call(0, "f"), call(1, "g"), resp(2, "g", `{"ok":1}`), resp(3, "f", `{"error":"down"}`),
		call(4, "f"), resp(5, "h", `{"ok":2}`),
		conformance.Frame("req1", 6, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{}, nil),
	}
	steps := []conformance.Step{{Kind: conformance.StepStart}}
	for i := range frames {
		steps = append(steps, conformance.Step{Kind: conformance.StepFrame, Frame: i})
	}
	steps = append(steps, conformance.Step{Kind: conformance.StepEnd})
	run, err := conformance.Run(conformance.Scenario{Frames: frames, Steps: steps, Final: true}, func(o *render.Output) render.Renderer {
		return NewRenderer(o, Params{JSONRPCID: json.RawMessage(`1`), SessionID: "s1"})
	})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := conformance.NDJSONLines(run.Body)
	if err != nil {
		t.Fatal(err)
	}
	type event struct{ kind, id, title, status string }
	var got []event
	for _, m := range msgs[:len(msgs)-1] {
		var probe struct {
			Params struct {
				Update struct {
					SessionUpdate string `json:"sessionUpdate"`
					ToolCallID    string `json:"toolCallId"`
					Title         string `json:"title"`
					Status        string `json:"status"`
				} `json:"update"`
			} `json:"params"`
		}
		if err := json.Unmarshal(m, &probe); err != nil {
			t.Fatal(err)
		}
		u := probe.Params.Update
		got = append(got, event{u.SessionUpdate, u.ToolCallID, u.Title, u.Status})
	}
	if len(got) != 7 {
		t.Fatalf("updates %+v; want 7 (3 calls, 2 results, h's call, f's second call ended failed)", got)
	}
	ids := map[string]bool{}
	for _, e := range got {
		if e.id == "" || !strings.Contains(e.id, "req1") {
			t.Errorf("update %+v: toolCallId %q; want one naming its request", e, e.id)
		}
		if e.kind == "tool_call" {
			if ids[e.id] {
				t.Errorf("two tool calls with id %q: %+v", e.id, got)
			}
			ids[e.id] = true
		}
	}
	f1, g, f2 := got[0].id, got[1].id, got[4].id
	want := []event{
		{"tool_call", f1, "f", "in_progress"}, {"tool_call", g, "g", "in_progress"},
		{"tool_call_update", g, "", "completed"}, {"tool_call_update", f1, "", "failed"},
		{"tool_call", f2, "f", "in_progress"}, {"tool_call", got[5].id, "h", "completed"},
		{"tool_call_update", f2, "", "failed"},
	}
	for i := range want {
		w := want[i]
		if got[i].kind != w.kind || got[i].id != w.id || (w.title != "" && got[i].title != w.title) || got[i].status != w.status {
			t.Errorf("update %d: %+v; want %+v", i, got[i], w)
		}
	}
}
