package ingress_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
)

// TestInterruptE2A: an E2A request asking for input streams its frames
// as stored, the last the interrupt (read by Response.Interrupt); a stream
// resumed after it gets nothing more (204); GET /v1/requests/{id} answers state
// input-required (auth-required for one asking for auth); the next request
// naming the task is answered as usual, its envelope and frames in the
// task.
func TestInterruptE2A(t *testing.T) {
	p := startPipeline(t)
	resp := p.post(t, "/v1/requests", "text/event-stream", `{"request_id":"ask-1","task_id":"task-e2a","params":{"text":"the weather","ask":"input"}}`)
	frames := framesOf(t, readSSE(t, resp.Body))
	q := demo.Question(e2a.StateInputRequired, "the weather")
	if len(frames) != 3 {
		t.Fatalf("%d frames", len(frames))
	}
	last := frames[2]
	if st, text, ok := last.Interrupt(); !ok || st != e2a.StateInputRequired || text != q || last.Status != e2a.StatusSucceeded || last.TaskID != "task-e2a" {
		t.Fatalf("final frame %+v: %q %q %v", last, st, text, ok)
	}
	resumed := p.get(t, "/v1/requests/ask-1/stream", "Last-Event-ID", "2")
	// Nothing after the final frame: 204, as after a completed request's.
	if evs := readSSE(t, resumed.Body); resumed.StatusCode != 204 || len(evs) != 0 {
		t.Fatalf("resumed after the interrupt: %d, %d events", resumed.StatusCode, len(evs))
	}
	var view egress.RequestView
	if r := p.get(t, "/v1/requests/ask-1"); r.StatusCode != 200 || jsonDecode(r, &view) != nil || view.State != egress.StateInputRequired || len(view.Frames) != 3 {
		t.Fatalf("GET: %d %+v", r.StatusCode, view)
	}

	// The answer: a new turn of the task.
	var answer struct {
		State    string
		Envelope e2a.Envelope
		Frames   []json.RawMessage
	}
	if r := p.post(t, "/v1/requests?wait=true", "", `{"request_id":"ask-2","task_id":"task-e2a","params":{"text":"Paris"}}`); jsonDecode(r, &answer) != nil || answer.State != egress.StateSucceeded {
		t.Fatalf("the answer: %+v", answer)
	}
	fin, err := e2a.ResponseFromJSON(answer.Frames[len(answer.Frames)-1])
	if err != nil {
		t.Fatal(err)
	}
	c, _ := fin.Complete()
	if answer.Envelope.TaskID != "task-e2a" || fin.TaskID != "task-e2a" || !strings.Contains(string(e2a.MarshalBody(c.Result)), "You said: Paris") {
		t.Fatalf("the answer's envelope task %q, final frame %+v", answer.Envelope.TaskID, fin)
	}

	if r := p.post(t, "/v1/requests?wait=true", "", `{"request_id":"ask-3","params":{"text":"the calendar","ask":"auth"}}`); jsonDecode(r, &view) != nil || view.State != egress.StateAuthRequired {
		t.Fatalf("asking for auth: %+v", view)
	}
}

// TestInterruptACPHTTP: over /acp, a prompt asking for input ends its turn
// with the question as agent_message_chunk, then end_turn; the next prompt
// is the answer.
func TestInterruptACPHTTP(t *testing.T) {
	p := startPipeline(t)
	sid := p.acpSession(t)
	resp := p.post(t, "/acp", "", `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"ask:input the weather"}]}}`)
	msgs := ndjsonMsgs(t, resp.Body)
	var kinds, said []string
	for _, m := range msgs[:len(msgs)-1] {
		k, _ := m.Params.Update["sessionUpdate"].(string)
		kinds = append(kinds, k)
		if k == "agent_message_chunk" {
			c, _ := m.Params.Update["content"].(map[string]any)
			said = append(said, c["text"].(string))
		}
	}
	q := demo.Question(e2a.StateInputRequired, "the weather")
	if strings.Join(kinds, " ") != "agent_thought_chunk agent_message_chunk agent_message_chunk" ||
		strings.Join(said, "|") != "I need more from you first.|\n\n"+q { // the question a paragraph of its own
		t.Fatalf("updates %v %q", kinds, said)
	}
	var res struct{ StopReason string }
	if last := msgs[len(msgs)-1]; string(last.ID) != "1" || json.Unmarshal(last.Result, &res) != nil || res.StopReason != "end_turn" {
		t.Fatalf("result %+v %s", last, last.Result)
	}
	resp = p.post(t, "/acp", "", `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"Paris"}]}}`)
	checkTurn(t, ndjsonMsgs(t, resp.Body), sid, "2", "Paris", "end_turn")
}

// TestInterruptACPStdio: acp-go-sdk's client over stdio: the prompt asking
// for auth ends with the question and end_turn; the next prompt answers.
func TestInterruptACPStdio(t *testing.T) {
	in, out, _ := startStdio(t)
	ctx, conn, client, sid := openStdioSession(t, in, out, 60*time.Second)
	prompt := func(text string) acp.PromptResponse {
		t.Helper()
		res, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
		if err != nil {
			t.Fatalf("prompt %q: %v", text, err)
		}
		return res
	}
	if res := prompt("ask:auth the calendar"); res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("stop reason %s", res.StopReason)
	}
	kinds, text := updateKinds(client.Take(sid))
	if want := "I need your authorization first.\n\n" + demo.Question(e2a.StateAuthRequired, "the calendar"); kinds != "agent_thought_chunk agent_message_chunk" || text != want {
		t.Fatalf("updates %q %q, want the question %q", kinds, text, want)
	}
	if res := prompt("approved"); res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("stop reason %s", res.StopReason)
	}
	if kinds, text := updateKinds(client.Take(sid)); kinds != demoTurn || text != "You said: approved" {
		t.Fatalf("the answer's updates %q %q", kinds, text)
	}
}
