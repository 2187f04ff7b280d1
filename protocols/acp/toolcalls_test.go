package acp_test

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/acp"
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
//   - "plain": a function_response whose response is a plain string;
//   - "mcp": one whose response is an MCP CallToolResult with isError;
//   - "big": one whose response is a string of 200 KiB;
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
	case "ran", "error", "plain", "mcp", "big":
		var resp any = `{"temp":"20°C"}`
		switch text {
		case "error":
			resp = `{"error":"the weather service is down"}`
		case "plain":
			resp = "sunny, 20°C"
		case "mcp":
			resp = map[string]any{"isError": true, "content": []any{map[string]any{"type": "text", "text": "no such city"}}}
		case "big":
			resp = strings.Repeat("é", 100<<10)
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
// prompt's answer, never left in_progress for ever, with a line of
// content saying why (the turn ended, failed or was cancelled before the
// tool answered: an editor's card was empty); and session/load replays
// each call to the same last status and content.
func TestACPToolCallLifecycle(t *testing.T) {
	s := stdioSession(t, toolAgent)
	prompt := func(text string) (acpsdk.PromptResponse, error) {
		return s.Conn.Prompt(s.Ctx, acpsdk.PromptRequest{SessionId: s.ID, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock(text)}})
	}
	want := map[string]acpsdk.ToolCallStatus{}
	wantText := map[string]string{} // the last content's text of each call holds it
	checkText := func(what string, updates []acpsdk.SessionUpdate, ids ...string) {
		t.Helper()
		texts, _ := toolContents(t, updates)
		for _, id := range ids {
			if got := texts[id]; len(got) == 0 || !strings.Contains(got[len(got)-1], wantText[id]) {
				t.Errorf("%s: tool call %s: content %q, want a text holding %q", what, id, got, wantText[id])
			}
		}
	}
	check := func(text string, stop acpsdk.StopReason, wantErr bool, res acpsdk.PromptResponse, err error, status acpsdk.ToolCallStatus, content string) {
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
		want[id], wantText[id] = status, content
		checkText(text, ups, id)
	}
	for _, c := range []struct {
		text    string
		stop    acpsdk.StopReason
		wantErr bool
		status  acpsdk.ToolCallStatus
		content string
	}{
		{"ran", acpsdk.StopReasonEndTurn, false, acpsdk.ToolCallStatusCompleted, "20°C"},
		{"unrun", acpsdk.StopReasonEndTurn, false, acpsdk.ToolCallStatusFailed, "no result: the turn ended before the tool answered"},
		{"error", acpsdk.StopReasonEndTurn, false, acpsdk.ToolCallStatusFailed, "the weather service is down"},
		{"fail", "", true, acpsdk.ToolCallStatusFailed, "no result: the turn failed before the tool answered"},
	} {
		res, err := prompt(c.text)
		check(c.text, c.stop, c.wantErr, res, err, c.status, c.content)
	}
	s.Rec.CancelMidTurn(t, s.Ctx, s.Conn, s.ID, func() (acpsdk.PromptResponse, error) { return prompt("hang") })
	check("hang", acpsdk.StopReasonCancelled, false, acpsdk.PromptResponse{StopReason: acpsdk.StopReasonCancelled}, nil, acpsdk.ToolCallStatusFailed,
		"cancelled: the turn was cancelled before the tool answered")

	// session/load: the replay ends every call as the live turns did.
	if _, err := s.Conn.LoadSession(s.Ctx, acpsdk.LoadSessionRequest{SessionId: s.ID, Cwd: "/work", McpServers: []acpsdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	replay := s.Rec.Take(s.ID)
	ids, last := callStatuses(t, replay)
	checkText("session/load", replay, slices.Collect(maps.Keys(wantText))...)
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

// toolContents returns the text of each content block of the tool calls
// of updates (tool_call and tool_call_update), by call id, and whether
// a tool_call (the call's start) carried any.
func toolContents(t *testing.T, updates []acpsdk.SessionUpdate) (texts map[string][]string, atStart bool) {
	t.Helper()
	texts = map[string][]string{}
	add := func(id acpsdk.ToolCallId, cs []acpsdk.ToolCallContent) {
		for _, c := range cs {
			if c.Content == nil || c.Content.Content.Text == nil {
				t.Errorf("tool call %s: content %+v, want a text block", id, c)
				continue
			}
			texts[string(id)] = append(texts[string(id)], c.Content.Content.Text.Text)
		}
	}
	for _, u := range updates {
		switch {
		case u.ToolCall != nil:
			atStart = atStart || len(u.ToolCall.Content) > 0
			add(u.ToolCall.ToolCallId, u.ToolCall.Content)
		case u.ToolCallUpdate != nil:
			add(u.ToolCallUpdate.ToolCallId, u.ToolCallUpdate.Content)
		}
	}
	return texts, atStart
}

// TestToolCallContent: the tool_call_update that ends a call carries the
// tool's output as its content (ACP's ToolCallContent, a text block), which
// is what an editor's tool card shows: an object as indented JSON, a string
// as is, a failed call its error text (an "error" member, an MCP
// CallToolResult's text), an output over the bound cut at a character's
// boundary with a note; rawOutput stays the whole output. The call's start
// has no content (its args are rawInput). acp-go-sdk's client over stdio
// from a real pipeline, live and on session/load. Without it the cards
// were empty: the updates had rawInput and rawOutput alone.
func TestToolCallContent(t *testing.T) {
	s := stdioSession(t, toolAgent)
	want := map[string]string{
		"ran":   "{\n  \"temp\": \"20°C\"\n}",
		"error": "the weather service is down",
		"plain": "sunny, 20°C",
		"mcp":   "no such city",
	}
	check := func(what string, texts map[string][]string, atStart bool) {
		t.Helper()
		if atStart {
			t.Errorf("%s: a tool_call carries content; want none at the call's start", what)
		}
		for text, w := range want {
			if got := texts["call_"+text]; len(got) != 1 || got[0] != w {
				t.Errorf("%s: %s: content %q, want [%q]", what, text, got, w)
			}
		}
		big := texts["call_big"]
		if len(big) != 1 || len(big[0]) > acp.MaxToolContent+200 || !utf8.ValidString(big[0]) ||
			!strings.HasPrefix(big[0], strings.Repeat("é", 100)) || !strings.Contains(big[0], "rawOutput") {
			n := 0
			if len(big) == 1 {
				n = len(big[0])
			}
			t.Errorf("%s: big: %d block(s), %d bytes; want one, bounded near %d bytes, valid UTF-8, noting rawOutput", what, len(big), n, acp.MaxToolContent)
		}
	}
	var live []acpsdk.SessionUpdate
	for _, text := range []string{"ran", "error", "plain", "mcp", "big"} {
		res, err := s.Conn.Prompt(s.Ctx, acpsdk.PromptRequest{SessionId: s.ID, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock(text)}})
		if err != nil || res.StopReason != acpsdk.StopReasonEndTurn {
			t.Fatalf("%s: prompt %+v %v", text, res, err)
		}
		live = append(live, s.Rec.Take(s.ID)...)
	}
	texts, atStart := toolContents(t, live)
	check("live", texts, atStart)
	if out := rawOutputs(live); len(out) != 5 || out[4] != strings.Repeat("é", 100<<10) {
		t.Errorf("rawOutputs: %d, the big one cut; want 5, whole", len(out))
	}
	if _, err := s.Conn.LoadSession(s.Ctx, acpsdk.LoadSessionRequest{SessionId: s.ID, Cwd: "/work", McpServers: []acpsdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	texts, atStart = toolContents(t, s.Rec.Take(s.ID))
	check("session/load", texts, atStart)
}
