package acp_test

import (
	"fmt"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"
)

// TestPendingCallEndedByNextTurn: a call a turn interrupted for input
// left pending (call_ask) is ended failed at the end of the next turn
// when that turn never answers it: one that ends with an answer of its
// own ("ran"), one that ends in the agent's error ("nope"), and after two
// interrupted turns in a row, the third. It stayed pending for ever (an
// editor showed a spinner): each turn ended only the calls it had started.
// session/load replays the same trail.
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
		got := statusTrail(s.Rec.Take(s.ID))
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
