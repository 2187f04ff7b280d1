package acp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// turnsToolAgent answers by the prompt's text:
//
//   - "ran": function_call call_0, its response, text, complete;
//   - "unrun": function_call call_0 (the same id, as the OpenAI bridge's
//     call_<index> for an upstream without ids), complete with
//     finish_reason tool_calls;
//   - "late": function_call call_late, a text chunk, then the response in
//     a later frame, complete;
//   - "a2a": an A2A artifact-update carrying a function_call data part,
//     then a status-update carrying its function_response, complete;
//   - "ask": function_call call_ask, then an input-required interrupt;
//   - "answer": call_ask's function_response, text, complete.
func turnsToolAgent(_ context.Context, env *e2a.Envelope, w agent.Writer) error {
	call := func(id string) error {
		return w.Chunk(e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionCall, ID: id, Name: "get_weather", Args: `{"city":"Paris"}`})
	}
	response := func(id string) error {
		return w.Chunk(e2a.DeltaTool, e2a.ToolDelta{Type: e2a.ToolFunctionResponse, ID: id, Name: "get_weather", Response: `{"temp":"20°C"}`})
	}
	steps := map[string][]func() error{
		"ran":   {func() error { return call("call_0") }, func() error { return response("call_0") }},
		"unrun": {func() error { return call("call_0") }},
		"late": {func() error { return call("call_late") }, func() error { return w.Chunk(e2a.DeltaText, "looking") },
			func() error { return response("call_late") }},
		"a2a": {func() error {
			return w.Write(e2a.KindA2AStreamEvent, e2a.StatusInProgress, e2a.StreamEventBody{Branch: e2a.BranchArtifactUpdate,
				Payload: map[string]any{"kind": "artifact-update", "taskId": "t", "contextId": "c", "artifact": map[string]any{
					"artifactId": "a1", "parts": []any{map[string]any{"kind": "data", "metadata": map[string]any{"type": "function_call"},
						"data": map[string]any{"id": "call_a2a", "name": "get_weather", "args": map[string]any{"city": "Paris"}}}}}}}, false)
		}, func() error {
			return w.Write(e2a.KindA2AStreamEvent, e2a.StatusInProgress, e2a.StreamEventBody{Branch: e2a.BranchStatusUpdate,
				Payload: map[string]any{"kind": "status-update", "taskId": "t", "contextId": "c", "final": false, "status": map[string]any{
					"state": "working", "message": map[string]any{"kind": "message", "messageId": "m1", "role": "agent", "parts": []any{
						map[string]any{"kind": "data", "metadata": map[string]any{"type": "function_response"},
							"data": map[string]any{"id": "call_a2a", "name": "get_weather", "response": map[string]any{"temp": "20°C"}}}}}}}}, false)
		}},
		"ask":    {func() error { return call("call_ask") }},
		"answer": {func() error { return response("call_ask") }},
	}
	text := demo.Text(env)
	s, ok := steps[text]
	if !ok {
		return errors.New("unknown prompt " + text)
	}
	for _, f := range s {
		if err := f(); err != nil {
			return err
		}
	}
	switch text {
	case "ask":
		return agent.Interrupt(w, e2a.StateInputRequired, "May I call get_weather?")
	case "unrun":
		return w.Complete(map[string]any{"finish_reason": "tool_calls"})
	}
	if err := w.Chunk(e2a.DeltaText, "done"); err != nil {
		return err
	}
	return w.Complete(map[string]any{"finish_reason": "stop"})
}

// statusTrail is the sequence of (id, status) a client sees of updates'
// tool calls: a tool_call's status, then each tool_call_update's.
func statusTrail(updates []acpsdk.SessionUpdate) []string {
	var out []string
	for _, u := range updates {
		switch {
		case u.ToolCall != nil:
			out = append(out, string(u.ToolCall.ToolCallId)+"="+string(u.ToolCall.Status))
		case u.ToolCallUpdate != nil && u.ToolCallUpdate.Status != nil:
			out = append(out, string(u.ToolCallUpdate.ToolCallId)+"="+string(*u.ToolCallUpdate.Status))
		}
	}
	return out
}

// TestToolCallsAcrossTurns (a guard): tool calls over acp-go-sdk's
// client on stdio: one id used in two turns ends completed then failed,
// each turn ending its own; a response in a later frame after a text
// chunk completes its call; an A2A agent's data parts start and end a
// call; the call of a turn interrupted for input (the agent asks, e.g.
// for approval of that call) is left pending at its end, as ACP's status
// for a call awaiting approval, not failed, and completed by the next
// turn's response; session/load replays the
// same trail, turn by turn, as the live turns gave.
func TestToolCallsAcrossTurns(t *testing.T) {
	s := stdioSession(t, turnsToolAgent)
	want := map[string][]string{
		"ran":    {"call_0=in_progress", "call_0=completed"},
		"unrun":  {"call_0=in_progress", "call_0=failed"},
		"late":   {"call_late=in_progress", "call_late=completed"},
		"a2a":    {"call_a2a=in_progress", "call_a2a=completed"},
		"ask":    {"call_ask=in_progress", "call_ask=pending"},
		"answer": {"call_ask=completed"},
	}
	var live []string
	for _, text := range []string{"ran", "unrun", "late", "a2a", "ask", "answer"} {
		res, err := s.Conn.Prompt(s.Ctx, acpsdk.PromptRequest{SessionId: s.ID, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock(text)}})
		if err != nil || res.StopReason != acpsdk.StopReasonEndTurn {
			t.Fatalf("%s: %+v %v", text, res, err)
		}
		got := statusTrail(s.Rec.Take(s.ID))
		t.Logf("%s: %v", text, got)
		if len(got) != len(want[text]) {
			t.Errorf("%s: tool call trail %v, want %v", text, got, want[text])
		} else {
			for i := range got {
				if got[i] != want[text][i] {
					t.Errorf("%s: tool call trail %v, want %v", text, got, want[text])
					break
				}
			}
		}
		live = append(live, got...)
	}
	if _, err := s.Conn.LoadSession(s.Ctx, acpsdk.LoadSessionRequest{SessionId: s.ID, Cwd: "/work", McpServers: []acpsdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	replay := statusTrail(s.Rec.Take(s.ID))
	if len(replay) != len(live) {
		t.Fatalf("session/load trail %v, live %v", replay, live)
	}
	for i := range replay {
		if replay[i] != live[i] {
			t.Fatalf("session/load trail %v, live %v", replay, live)
		}
	}
}

// sseMessages posts body to url with hdr and returns its SSE events: each
// event's id and data.
func sseMessages(t *testing.T, url, body string, hdr ...string) (ids []string, data []string) {
	t.Helper()
	resp := testkit.Open(t, http.MethodPost, url, body, append([]string{"Accept", "text/event-stream"}, hdr...)...)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	id := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "data:"):
			ids = append(ids, id)
			data = append(data, strings.TrimSpace(strings.TrimPrefix(line, "data:")))
			id = ""
		}
	}
	return ids, data
}

// TestResumedPromptEndsItsCalls: an ACP session/prompt over HTTP SSE
// (Idempotency-Key), its stream resumed (the same key, Last-Event-ID after
// the tool_call's event, as a client that dropped just after it) does not
// leave the call running: the resumed stream's end gives it its
// tool_call_update failed before the prompt's answer, as the first stream
// did (the renderer is a render.Primer: it learns of the calls the client
// saw before the resume point).
func TestResumedPromptEndsItsCalls(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("agent")))
	p.Pool("agent", agent.HandlerFunc(turnsToolAgent))
	b, _ := io.ReadAll(testkit.Open(t, http.MethodPost, p.URL+"/acp",
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`).Body)
	var sess struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if json.Unmarshal(b, &sess) != nil || sess.Result.SessionID == "" {
		t.Fatalf("session/new: %s", b)
	}
	body := `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"` + sess.Result.SessionID +
		`","prompt":[{"type":"text","text":"unrun"}]}}`
	const key = "review-resume-0001"
	ids, data := sseMessages(t, p.URL+"/acp", body, "Idempotency-Key", key)
	after := ""
	for i, d := range data {
		if strings.Contains(d, `"sessionUpdate":"tool_call"`) {
			after = ids[i]
		}
	}
	if after == "" || !strings.Contains(strings.Join(data, "\n"), `"status":"failed"`) {
		t.Fatalf("first stream: no tool_call event with an id, or no failed update: ids %q data %q", ids, data)
	}
	_, resumed := sseMessages(t, p.URL+"/acp", body, "Idempotency-Key", key, "Last-Event-ID", after)
	all := strings.Join(resumed, "\n")
	if !strings.Contains(all, `"stopReason"`) {
		t.Fatalf("resumed stream has no answer: %q", resumed)
	}
	if !strings.Contains(all, `"toolCallId":"call_0"`) || !strings.Contains(all, `"status":"failed"`) {
		t.Fatalf("the resumed stream (after event %s, the tool_call's) ends without ending call_0: %q", after, resumed)
	}
}
