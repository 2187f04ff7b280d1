package acp_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/acp"
)

// badEnumAgent writes native ACP updates whose enum members hold values
// ACP's schema does not have: a tool call of kind "shell", status
// "running"; its update of kind "bash", status "done"; a plan whose
// entries have priority "urgent" and status "blocked", or none; and the
// same plan as an e2a.chunk (custom {type: plan}).
func badEnumAgent(_ context.Context, env *e2a.Envelope, w agent.Writer) error {
	if demo.Text(env) != "go" {
		return errors.New("unknown prompt")
	}
	entries := []any{
		map[string]any{"content": "look", "priority": "urgent", "status": "blocked"},
		map[string]any{"content": "fix"},
		map[string]any{"content": "ship", "priority": "low", "status": "completed"},
	}
	for _, u := range []map[string]any{
		{"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ls", "kind": "shell", "status": "running"},
		{"sessionUpdate": "tool_call_update", "toolCallId": "t1", "kind": "bash", "status": "done"},
		{"sessionUpdate": "plan", "entries": entries},
	} {
		if err := w.Write(e2a.KindACPSessionUpd, e2a.StatusInProgress, u, false); err != nil {
			return err
		}
	}
	if err := w.Chunk(e2a.DeltaTool, map[string]any{"type": "plan", "entries": entries}); err != nil {
		return err
	}
	return w.Complete(map[string]any{"finish_reason": "stop"})
}

// checkEnums reports each enum member of ups outside ACP's schema.
func checkEnums(t *testing.T, where string, ups []acpsdk.SessionUpdate) {
	t.Helper()
	kinds := map[acpsdk.ToolKind]bool{acpsdk.ToolKindRead: true, acpsdk.ToolKindEdit: true, acpsdk.ToolKindDelete: true,
		acpsdk.ToolKindMove: true, acpsdk.ToolKindSearch: true, acpsdk.ToolKindExecute: true, acpsdk.ToolKindThink: true,
		acpsdk.ToolKindFetch: true, acpsdk.ToolKindSwitchMode: true, acpsdk.ToolKindOther: true}
	statuses := map[acpsdk.ToolCallStatus]bool{acpsdk.ToolCallStatusPending: true, acpsdk.ToolCallStatusInProgress: true,
		acpsdk.ToolCallStatusCompleted: true, acpsdk.ToolCallStatusFailed: true}
	plans := 0
	for _, u := range ups {
		switch {
		case u.ToolCall != nil:
			if u.ToolCall.Kind != "" && !kinds[u.ToolCall.Kind] || u.ToolCall.Status != "" && !statuses[u.ToolCall.Status] {
				t.Errorf("%s: tool_call kind %q status %q", where, u.ToolCall.Kind, u.ToolCall.Status)
			}
		case u.ToolCallUpdate != nil:
			if k := u.ToolCallUpdate.Kind; k != nil && !kinds[*k] {
				t.Errorf("%s: tool_call_update kind %q", where, *k)
			}
			if s := u.ToolCallUpdate.Status; s != nil && !statuses[*s] {
				t.Errorf("%s: tool_call_update status %q", where, *s)
			}
		case u.Plan != nil:
			plans++
			want := []acpsdk.PlanEntry{
				{Content: "look", Priority: acpsdk.PlanEntryPriorityMedium, Status: acpsdk.PlanEntryStatusPending},
				{Content: "fix", Priority: acpsdk.PlanEntryPriorityMedium, Status: acpsdk.PlanEntryStatusPending},
				{Content: "ship", Priority: acpsdk.PlanEntryPriorityLow, Status: acpsdk.PlanEntryStatusCompleted},
			}
			if len(u.Plan.Entries) != len(want) {
				t.Fatalf("%s: plan %+v", where, u.Plan.Entries)
			}
			for i, e := range u.Plan.Entries {
				if e.Content != want[i].Content || e.Priority != want[i].Priority || e.Status != want[i].Status {
					t.Errorf("%s: plan entry %d %+v; want %+v", where, i, e, want[i])
				}
			}
		}
	}
	if plans != 2 {
		t.Errorf("%s: %d plans; want 2", where, plans)
	}
}

// TestNativeUpdateEnums: a native agent's session updates whose tool call
// kind or status, or plan entry priority or status, are none of ACP's
// reach the client with valid ones (kind other, the status left out,
// priority medium, status pending), live and on session/load. They were
// passed as they came: acp-go-sdk reads any string, a client checking the
// schema (Zed) refuses the notification.
func TestNativeUpdateEnums(t *testing.T) {
	s := stdioSession(t, badEnumAgent)
	res, err := s.Conn.Prompt(s.Ctx, acpsdk.PromptRequest{SessionId: s.ID, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock("go")}})
	if err != nil || res.StopReason != acpsdk.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v", res, err)
	}
	checkEnums(t, "live", s.Rec.Take(s.ID))
	if _, err := s.Conn.LoadSession(s.Ctx, acpsdk.LoadSessionRequest{SessionId: s.ID, Cwd: "/work", McpServers: []acpsdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	checkEnums(t, "session/load", s.Rec.Take(s.ID))
}

// TestPlanWithoutEntries: a plan without entries (an agent's native
// plan, or an e2a.chunk {type: plan}) is written with entries [], the
// array ACP's Plan requires: it was "entries":null.
func TestPlanWithoutEntries(t *testing.T) {
	for _, r := range []*e2a.Response{
		{RequestID: "r", ResponseKind: e2a.KindACPSessionUpd, Body: []byte(`{"sessionUpdate":"plan"}`)},
		{RequestID: "r", ResponseKind: e2a.KindChunk, Body: []byte(`{"delta_kind":"tool","delta":{"type":"plan"}}`)},
	} {
		ups, err := acp.Updates(r)
		if err != nil || len(ups) != 1 {
			t.Fatalf("%s: %v %v", r.ResponseKind, ups, err)
		}
		b, _ := json.Marshal(ups[0])
		if !strings.Contains(string(b), `"entries":[]`) {
			t.Errorf("%s: %s; want entries []", r.ResponseKind, b)
		}
	}
}
