package acp

import (
	"encoding/json"
	"errors"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

// TestRendererToolCallStatuses: the renderer's tool call statuses, NDJSON
// and SSE: a function_response says failed when its response carries an
// error (an "error" member, of an object or of the JSON string of one, or
// an MCP result's isError) and completed otherwise; a call still open when
// the answer ends (final frame or an error of the stream, such as the
// egress wait limit) gets a tool_call_update failed before the answer;
// native ACP tool calls (status pending) too.
func TestRendererToolCallStatuses(t *testing.T) {
	call := func(seq int64, id string) *e2a.Response {
		return conformance.Chunk("r", seq, e2a.DeltaTool, map[string]any{"type": "function_call", "id": id, "name": "f", "args": "{}"}, "")
	}
	resp := func(seq int64, id string, response any) *e2a.Response {
		return conformance.Chunk("r", seq, e2a.DeltaTool, map[string]any{"type": "function_response", "id": id, "name": "f", "response": response}, "")
	}
	native := conformance.Frame("r", 6, e2a.KindACPSessionUpd, e2a.StatusInProgress, false,
		map[string]any{"sessionUpdate": "tool_call", "toolCallId": "n1", "title": "native", "status": "pending"}, nil)
	frames := []*e2a.Response{
		call(0, "ok"), resp(1, "ok", `{"temp":"20°C","error":null}`),
		call(2, "str"), resp(3, "str", `{"error":"down"}`),
		call(4, "mcp"), resp(5, "mcp", map[string]any{"isError": true, "content": []any{}}),
		native, call(7, "open"),
		conformance.Frame("r", 8, e2a.KindComplete, e2a.StatusSucceeded, true, e2a.CompleteBody{Result: map[string]any{"finish_reason": "tool_calls"}}, nil),
	}
	want := map[string]acpsdk.ToolCallStatus{"ok": "completed", "str": "failed", "mcp": "failed", "n1": "failed", "open": "failed"}
	steps := func(n int, end error) []conformance.Step {
		out := []conformance.Step{{Kind: conformance.StepStart}}
		for i := 0; i < n; i++ {
			out = append(out, conformance.Step{Kind: conformance.StepFrame, Frame: i})
		}
		return append(out, conformance.Step{Kind: conformance.StepEnd, Err: end})
	}
	timeout := errors.New("no frame within the wait limit")
	for _, sse := range []bool{false, true} {
		for _, sc := range []struct {
			name string
			sc   conformance.Scenario
			want map[string]acpsdk.ToolCallStatus
		}{
			{"final", conformance.Scenario{Frames: frames, Steps: steps(len(frames), nil), Final: true}, want},
			{"stream error", conformance.Scenario{Frames: frames[:2+1], Steps: steps(3, timeout)},
				map[string]acpsdk.ToolCallStatus{"ok": "completed", "str": "failed"}},
		} {
			run, err := conformance.Run(sc.sc, func(o *render.Output) render.Renderer {
				return NewRenderer(o, Params{JSONRPCID: json.RawMessage(`42`), SessionID: "s1", SSE: sse})
			})
			if err != nil {
				t.Fatal(err)
			}
			read := conformance.NDJSONLines
			if sse {
				read = conformance.SSEData
			}
			msgs, err := read(run.Body)
			if err != nil {
				t.Fatal(err)
			}
			got := lastStatuses(t, msgs)
			for id, st := range sc.want {
				if got[id] != st {
					t.Errorf("sse=%v %s: tool call %s ends %q, want %q (all: %v)", sse, sc.name, id, got[id], st, got)
				}
			}
			if len(got) != len(sc.want) {
				t.Errorf("sse=%v %s: tool calls %v, want %v", sse, sc.name, got, sc.want)
			}
		}
	}
}

// lastStatuses reads the session/update notifications before the last
// message (the answer) and returns each tool call's last status.
func lastStatuses(t *testing.T, msgs [][]byte) map[string]acpsdk.ToolCallStatus {
	t.Helper()
	out := map[string]acpsdk.ToolCallStatus{}
	for i, m := range msgs {
		var probe struct {
			Method string                     `json:"method"`
			Params acpsdk.SessionNotification `json:"params"`
		}
		if err := json.Unmarshal(m, &probe); err != nil {
			t.Fatal(err)
		}
		if probe.Method != "session/update" {
			if i != len(msgs)-1 {
				t.Errorf("message %d is not a session/update before the answer: %s", i, m)
			}
			continue
		}
		u := probe.Params.Update
		switch {
		case u.ToolCall != nil:
			out[string(u.ToolCall.ToolCallId)] = u.ToolCall.Status
		case u.ToolCallUpdate != nil && u.ToolCallUpdate.Status != nil:
			out[string(u.ToolCallUpdate.ToolCallId)] = *u.ToolCallUpdate.Status
		}
	}
	return out
}
