package acp_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// upsertAgent writes its tool call as native ACP updates, the call's
// end as the tool_call again with its final status (a client upserts a
// tool_call by its id, as Zed does), then its answer.
func upsertAgent(_ context.Context, env *e2a.Envelope, w agent.Writer) error {
	if demo.Text(env) != "go" {
		return errors.New("unknown prompt")
	}
	for _, st := range []string{"in_progress", "completed"} {
		u := map[string]any{"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "read", "kind": "read", "status": st}
		if err := w.Write(e2a.KindACPSessionUpd, e2a.StatusInProgress, u, false); err != nil {
			return err
		}
	}
	if err := w.Chunk(e2a.DeltaText, "read it"); err != nil {
		return err
	}
	return w.Complete(map[string]any{"finish_reason": "stop"})
}

// TestToolCallEndedByUpsert: a tool call the agent ends by sending its
// tool_call again with status completed is not ended a second time, failed,
// at the turn's end (live and on session/load): the turn's tracker saw
// only tool_call_update end a call, and the editor showed a call the agent
// completed as failed.
func TestToolCallEndedByUpsert(t *testing.T) {
	s := stdioSession(t, upsertAgent)
	res, err := s.Conn.Prompt(s.Ctx, acpsdk.PromptRequest{SessionId: s.ID, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock("go")}})
	if err != nil || res.StopReason != acpsdk.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v", res, err)
	}
	want := "[t1=in_progress t1=completed]"
	if got := fmt.Sprint(statusTrail(s.Rec.Take(s.ID))); got != want {
		t.Errorf("live tool call trail %s; want %s", got, want)
	}
	if _, err := s.Conn.LoadSession(s.Ctx, acpsdk.LoadSessionRequest{SessionId: s.ID, Cwd: "/work", McpServers: []acpsdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(statusTrail(s.Rec.Take(s.ID))); got != want {
		t.Errorf("session/load tool call trail %s; want %s", got, want)
	}
}

// unknownKindAgent writes, before its answer, acp.session_update frames
// naming a kind ACP (as the SDK has it) does not know: one with content
// (a newer ACP's update, or a misspelled kind), one with nothing else.
func unknownKindAgent(_ context.Context, env *e2a.Envelope, w agent.Writer) error {
	if demo.Text(env) != "go" {
		return errors.New("unknown prompt")
	}
	for _, u := range []map[string]any{
		{"sessionUpdate": "agent_note", "content": map[string]any{"type": "text", "text": "note to self"}},
		{"sessionUpdate": "turn_progress"},
	} {
		if err := w.Write(e2a.KindACPSessionUpd, e2a.StatusInProgress, u, false); err != nil {
			return err
		}
	}
	if err := w.Chunk(e2a.DeltaText, "hello"); err != nil {
		return err
	}
	return w.Complete(map[string]any{"finish_reason": "stop"})
}

// kinds names the variant of each update as a client reads it.
func kinds(ups []acpsdk.SessionUpdate) []string {
	var out []string
	for _, u := range ups {
		switch {
		case u.UserMessageChunk != nil:
			out = append(out, "user_message_chunk")
		case u.AgentMessageChunk != nil:
			out = append(out, "agent_message_chunk")
		case u.SessionInfoUpdate != nil:
			out = append(out, "session_info_update")
		case u.ToolCall != nil:
			out = append(out, "tool_call")
		default:
			out = append(out, "other")
		}
	}
	return out
}

// TestUnknownUpdateKind: an acp.session_update frame of a kind the SDK
// does not know is no update to the client (as the A2A doors skip it),
// live and on session/load. The SDK reads such an update as the first
// kind whose members it has, and it was written so: {"sessionUpdate":
// "agent_note","content":…} reached the editor as a user_message_chunk
// (the agent's text shown as the user's message, and on load as a prompt
// the user never sent), {"sessionUpdate":"turn_progress"} as a
// session_info_update.
func TestUnknownUpdateKind(t *testing.T) {
	s := stdioSession(t, unknownKindAgent)
	res, err := s.Conn.Prompt(s.Ctx, acpsdk.PromptRequest{SessionId: s.ID, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock("go")}})
	if err != nil || res.StopReason != acpsdk.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v", res, err)
	}
	if got := kinds(s.Rec.Take(s.ID)); len(got) != 1 || got[0] != "agent_message_chunk" {
		t.Errorf("live updates %v; want [agent_message_chunk] (hello alone)", got)
	}
	if _, err := s.Conn.LoadSession(s.Ctx, acpsdk.LoadSessionRequest{SessionId: s.ID, Cwd: "/work", McpServers: []acpsdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	if got := kinds(s.Rec.Take(s.ID)); len(got) != 2 || got[0] != "user_message_chunk" || got[1] != "agent_message_chunk" {
		t.Errorf("session/load updates %v; want [user_message_chunk agent_message_chunk] (the prompt, hello)", got)
	}
}
