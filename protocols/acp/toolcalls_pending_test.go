package acp_test

import (
	"fmt"
	"strings"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"
)

// TestPendingCallEndedByNextTurn: a call a turn interrupted for input
// left pending (call_ask) is ended failed at the end of the next turn
// when that turn never answers it: one that ends with an answer of its
// own ("ran"), one that ends in the agent's error ("nope"), and after two
// interrupted turns in a row, the third. It stayed pending for ever (an
// editor showed a spinner): each turn ended only the calls it had started.
// A call ended so says why in its content (the turn ended or failed
// before the tool answered); one left pending has none. session/load
// replays the same trail.
func TestPendingCallEndedByNextTurn(t *testing.T) {
	s := stdioSession(t, turnsToolAgent)
	turns := []struct{ text, want string }{
		{"ask", "[call_ask=in_progress call_ask=pending]"},
		{"ran", "[call_0=in_progress call_0=completed call_ask=failed]"},
		{"ask", "[call_ask=in_progress call_ask=pending]"},
		{"nope", "[call_ask=failed]"},
		{"ask", "[call_ask=in_progress call_ask=pending]"},
		{"ask", "[call_ask=in_progress call_ask=pending]"},
		{"unrun", "[call_0=in_progress call_ask=failed call_0=failed]"},
		{"ask", "[call_ask=in_progress call_ask=pending]"},
		{"answer", "[call_ask=completed]"},
		{"ran", "[call_0=in_progress call_0=completed]"},
	}
	var live []string
	for _, tu := range turns {
		res, err := s.Conn.Prompt(s.Ctx, acpsdk.PromptRequest{SessionId: s.ID, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock(tu.text)}})
		if (err != nil) != (tu.text == "nope") {
			t.Fatalf("%s: %+v %v", tu.text, res, err)
		}
		ups := s.Rec.Take(s.ID)
		checkEndContent(t, tu.text, ups)
		got := statusTrail(ups)
		if fmt.Sprint(got) != tu.want {
			t.Errorf("%s: tool call trail %v, want %s", tu.text, got, tu.want)
		}
		live = append(live, got...)
	}
	if _, err := s.Conn.LoadSession(s.Ctx, acpsdk.LoadSessionRequest{SessionId: s.ID, Cwd: "/work", McpServers: []acpsdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	if replay := statusTrail(s.Rec.Take(s.ID)); fmt.Sprint(replay) != fmt.Sprint(live) {
		t.Errorf("session/load trail\n%v\nlive\n%v", replay, live)
	}
}

// checkEndContent checks the content of the tool_call_updates of updates
// that end a call left without a result (turn: the prompt's text): a
// failed one with no rawOutput (ended at the turn's end, not by a
// response) holds a line saying why, a pending one none.
func checkEndContent(t *testing.T, turn string, updates []acpsdk.SessionUpdate) {
	t.Helper()
	for _, u := range updates {
		tu := u.ToolCallUpdate
		if tu == nil || tu.Status == nil || tu.RawOutput != nil {
			continue
		}
		texts, _ := toolContents(t, []acpsdk.SessionUpdate{u})
		got := texts[string(tu.ToolCallId)]
		switch *tu.Status {
		case acpsdk.ToolCallStatusFailed:
			if len(got) != 1 || !strings.HasSuffix(got[0], "before the tool answered") {
				t.Errorf("%s: %s ended failed with content %q; want a line saying why", turn, tu.ToolCallId, got)
			}
		case acpsdk.ToolCallStatusPending:
			if len(got) != 0 {
				t.Errorf("%s: %s left pending with content %q; want none", turn, tu.ToolCallId, got)
			}
		}
	}
}
