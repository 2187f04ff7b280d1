package acp_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// toolAgent answers a prompt by its text: it announces the tool call
// named by the text (id "call_<text>") as a function_call frame, then
//
//   - "ran": its function_response, then text, and completes;
//   - "unrun": no response: it completes with finish_reason "tool_calls",
//     as the OpenAI bridge ends a turn whose model asked for tools nobody
//     runs;
//   - "error": a function_response whose response carries an error, then
//     completes;
//   - "fail": no response: it fails the turn (e2a.error);
//   - "hang": no response: it waits for the turn's cancel.
func toolAgent(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	text := demo.Text(env)
	id := "call_" + text
	if err := w.Chunk(e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionCall, ID: id, Name: "get_weather",
		Args: `{"city":"Paris"}`}); err != nil {
		return err
	}
	switch text {
	case "ran", "error":
		resp := `{"temp":"20°C"}`
		if text == "error" {
			resp = `{"error":"the weather service is down"}`
		}
		if err := w.Chunk(e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionResponse, ID: id, Name: "get_weather",
			Response: resp}); err != nil {
			return err
		}
		if err := w.Chunk(e2a.DeltaText, "done"); err != nil {
			return err
		}
		return w.Complete(map[string]any{"finish_reason": "stop"})
	case "unrun":
		return w.Complete(map[string]any{"finish_reason": "tool_calls"})
	case "fail":
		return w.Fail("handler_error", "the model went away", false)
	case "hang":
		<-ctx.Done()
		return ctx.Err()
	}
	return errors.New("unknown prompt " + text)
}

// callStatuses returns the tool calls of updates, in the order they
// started, and the last status each was given (a tool_call's, then its
// tool_call_updates'), as a client keeps them.
func callStatuses(t *testing.T, updates []acpsdk.SessionUpdate) (ids []string, last map[string]acpsdk.ToolCallStatus) {
	t.Helper()
	last = map[string]acpsdk.ToolCallStatus{}
	for _, u := range updates {
		switch {
		case u.ToolCall != nil:
			id := string(u.ToolCall.ToolCallId)
			ids = append(ids, id)
			last[id] = u.ToolCall.Status
		case u.ToolCallUpdate != nil:
			id := string(u.ToolCallUpdate.ToolCallId)
			if _, ok := last[id]; !ok {
				t.Errorf("tool_call_update of %s before its tool_call", id)
			}
			if u.ToolCallUpdate.Status != nil {
				last[id] = *u.ToolCallUpdate.Status
			}
		}
	}
	return ids, last
}

// TestACPToolCallLifecycle: the tool calls of an agent's turns as
// acp-go-sdk's client sees them over stdio from a real pipeline. A call
// the agent runs goes in_progress → completed; one whose response
// carries an error ends failed; one the turn ends without a result for
// (a model's tool call nobody ran: the OpenAI bridge's finish_reason
// "tool_calls"; a failed turn; a cancelled one) ends failed before the
// prompt's answer, never left in_progress for ever; and session/load
// replays each call to the same last status.
func TestACPToolCallLifecycle(t *testing.T) {
	s := stdioSession(t, toolAgent)
	prompt := func(text string) (acpsdk.PromptResponse, error) {
		return s.Conn.Prompt(s.Ctx, acpsdk.PromptRequest{SessionId: s.ID, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock(text)}})
	}
	want := map[string]acpsdk.ToolCallStatus{}
	check := func(text string, stop acpsdk.StopReason, wantErr bool, res acpsdk.PromptResponse, err error, status acpsdk.ToolCallStatus) {
		t.Helper()
		if (err != nil) != wantErr || (!wantErr && res.StopReason != stop) {
			t.Fatalf("%s: prompt %+v %v", text, res, err)
		}
		ups := s.Rec.Take(s.ID)
		ids, last := callStatuses(t, ups)
		id := "call_" + text
		if len(ids) != 1 || ids[0] != id {
			t.Fatalf("%s: tool calls %v, want [%s]", text, ids, id)
		}
		if first := ups[0].ToolCall; first == nil || first.Status != acpsdk.ToolCallStatusInProgress || first.Title != "get_weather" {
			t.Errorf("%s: first update %+v, want the tool_call in_progress", text, ups[0])
		}
		if last[id] != status {
			t.Errorf("%s: tool call %s ends %q, want %q", text, id, last[id], status)
		}
		want[id] = status
	}
	for _, c := range []struct {
		text    string
		stop    acpsdk.StopReason
		wantErr bool
		status  acpsdk.ToolCallStatus
	}{
		{"ran", acpsdk.StopReasonEndTurn, false, acpsdk.ToolCallStatusCompleted},
		{"unrun", acpsdk.StopReasonEndTurn, false, acpsdk.ToolCallStatusFailed},
		{"error", acpsdk.StopReasonEndTurn, false, acpsdk.ToolCallStatusFailed},
		{"fail", "", true, acpsdk.ToolCallStatusFailed},
	} {
		res, err := prompt(c.text)
		check(c.text, c.stop, c.wantErr, res, err, c.status)
	}
	s.Rec.CancelMidTurn(t, s.Ctx, s.Conn, s.ID, func() (acpsdk.PromptResponse, error) { return prompt("hang") })
	check("hang", acpsdk.StopReasonCancelled, false, acpsdk.PromptResponse{StopReason: acpsdk.StopReasonCancelled}, nil, acpsdk.ToolCallStatusFailed)

	// session/load: the replay ends every call as the live turns did.
	if _, err := s.Conn.LoadSession(s.Ctx, acpsdk.LoadSessionRequest{SessionId: s.ID, Cwd: "/work", McpServers: []acpsdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	ids, last := callStatuses(t, s.Rec.Take(s.ID))
	if len(ids) != len(want) {
		t.Errorf("replayed tool calls %v, want %d", ids, len(want))
	}
	for id, st := range want {
		if last[id] != st {
			t.Errorf("replayed tool call %s ends %q, want %q (as live)", id, last[id], st)
		}
	}
}

// rawOutputs returns the rawOutput of each tool_call_update of updates.
func rawOutputs(updates []acpsdk.SessionUpdate) []any {
	var out []any
	for _, u := range updates {
		if u.ToolCallUpdate != nil && u.ToolCallUpdate.RawOutput != nil {
			out = append(out, u.ToolCallUpdate.RawOutput)
		}
	}
	return out
}

// TestToolCallRawOutputObject: a function_response whose response is
// the JSON string of an object (as the spec's examples write it, and
// toolAgent's) reaches acp-go-sdk's client as a rawOutput object, live
// and on session/load, as its call's arguments reach it as rawInput: it
// was the string, which an editor showed as one quoted, escaped line.
func TestToolCallRawOutputObject(t *testing.T) {
	s := stdioSession(t, toolAgent)
	res, err := s.Conn.Prompt(s.Ctx, acpsdk.PromptRequest{SessionId: s.ID, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock("ran")}})
	if err != nil || res.StopReason != acpsdk.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v", res, err)
	}
	live := rawOutputs(s.Rec.Take(s.ID))
	if _, err := s.Conn.LoadSession(s.Ctx, acpsdk.LoadSessionRequest{SessionId: s.ID, Cwd: "/work", McpServers: []acpsdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	replayed := rawOutputs(s.Rec.Take(s.ID))
	want := []any{map[string]any{"temp": "20°C"}}
	if !reflect.DeepEqual(live, want) {
		t.Errorf("live rawOutput %#v; want %#v", live, want)
	}
	if !reflect.DeepEqual(replayed, want) {
		t.Errorf("session/load rawOutput %#v; want %#v", replayed, want)
	}
}
