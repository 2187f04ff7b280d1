package openai_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/acptest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// acpSession is one ACP session of acp-go-sdk's client over stdio with
// a pipeline.
type acpSession struct{ *acptest.Session }

// openACPSession serves ACP over stdio from p (its default pool) to
// acp-go-sdk's client and opens a session.
func openACPSession(t *testing.T, p *pipetest.Pipeline) acpSession {
	t.Helper()
	return acpSession{acptest.OpenStdio(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return ingress.ServeACPStdio(ctx, in, out, p.Ingress)
	})}
}

// acpTurn is what the client saw of one prompt.
type acpTurn struct {
	stop              acp.StopReason
	text, thought     string
	calls, callStatus []string // tool_call ids and their last status
}

func (s acpSession) prompt(t *testing.T, text string) acpTurn {
	t.Helper()
	res, err := s.Conn.Prompt(s.Ctx, acp.PromptRequest{SessionId: s.ID, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
	if err != nil {
		t.Fatalf("prompt %q: %v", text, err)
	}
	out := acpTurn{stop: res.StopReason}
	status := map[acp.ToolCallId]string{}
	for _, u := range s.Rec.Take(s.ID) {
		switch {
		case u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil:
			out.text += u.AgentMessageChunk.Content.Text.Text
		case u.AgentThoughtChunk != nil && u.AgentThoughtChunk.Content.Text != nil:
			out.thought += u.AgentThoughtChunk.Content.Text.Text
		case u.ToolCall != nil:
			out.calls = append(out.calls, string(u.ToolCall.ToolCallId))
			status[u.ToolCall.ToolCallId] = string(u.ToolCall.Status)
		case u.ToolCallUpdate != nil && u.ToolCallUpdate.Status != nil:
			status[u.ToolCallUpdate.ToolCallId] = string(*u.ToolCallUpdate.Status)
		}
	}
	for _, id := range out.calls {
		out.callStatus = append(out.callStatus, status[acp.ToolCallId(id)])
	}
	return out
}

// TestACPOpenAIContent: a bridged OpenAI pool answered over ACP
// (acp-go-sdk over stdio): the text as agent_message_chunk, the
// reasoning as agent_thought_chunk, the streamed tool calls as tool_call
// updates (their ids, ended failed: nobody runs them), each ending
// end_turn.
func TestACPOpenAIContent(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	s := openACPSession(t, p)
	if got := s.prompt(t, "fixture:text"); got.stop != acp.StopReasonEndTurn || got.text != fixtures["text"].content {
		t.Errorf("text: %+v, want end_turn %q", got, fixtures["text"].content)
	}
	w := fixtures["reasoning"]
	if got := s.prompt(t, "fixture:reasoning"); got.stop != acp.StopReasonEndTurn || got.text != w.content || got.thought != w.reasoning {
		t.Errorf("reasoning: %+v, want text %q thought %q", got, w.content, w.reasoning)
	}
	got := s.prompt(t, "fixture:tools")
	if strings.Join(got.calls, ",") != "call_Wp1XeR4fA2,call_Kz7LmQ9sB3" {
		t.Errorf("tools: %+v, want tool_call updates of the two calls", got)
	}
	// Nobody runs a model's tool calls: the turn's end ends them failed,
	// never left in_progress (protocols/acp openCalls).
	if strings.Join(got.callStatus, ",") != "failed,failed" {
		t.Errorf("tools: statuses %q at the turn's end, want failed,failed", got.callStatus)
	}
}

// TestACPOpenAIToolCallIDsUnique: a model server that streams its tool
// calls without ids gets ids from the bridge, unique in the ACP session
// (ACP keys a session's tool calls by id: the second turn's calls named as
// the first's would update the first turn's in the editor).
func TestACPOpenAIToolCallIDsUnique(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	s := openACPSession(t, p)
	seen := map[string]int{}
	for turn := range 2 {
		got := s.prompt(t, "fixture:tools_idless")
		if len(got.calls) != 2 {
			t.Fatalf("turn %d: tool calls %q, want 2", turn, got.calls)
		}
		for _, id := range got.calls {
			if prev, ok := seen[id]; ok || id == "" {
				t.Errorf("turn %d: tool call id %q (turn %d had it too)", turn, id, prev)
			}
			seen[id] = turn
		}
	}
}

// TestACPOpenAIMultiTurn: the second prompt of one ACP session
// sends the model the first turn (user message and the model's reply), a
// prompt of another session none of it.
func TestACPOpenAIMultiTurn(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	s := openACPSession(t, p)
	if got := s.prompt(t, "my name is Ada"); got.text != "echo: my name is Ada" {
		t.Fatalf("first prompt: %+v", got)
	}
	if got := s.prompt(t, "what is my name?"); got.text != "echo: what is my name?" {
		t.Fatalf("second prompt: %+v", got)
	}
	wantMessages(t, "the session's second prompt", lastMessages(t, srv), "user: my name is Ada",
		"assistant: echo: my name is Ada", "user: what is my name?")
	other := openACPSession(t, p)
	other.prompt(t, "hi")
	wantMessages(t, "another session", lastMessages(t, srv), "user: hi")
}

// TestACPOpenAIStopReason: a completion the model server cut at
// its token limit (finish_reason "length") ends the ACP prompt with
// stopReason max_tokens, and one its content filter stopped
// ("content_filter") with refusal: ACP's reasons for exactly those. The
// bridge records finish_reason in the final frame's result, and the ACP
// mapping (protocols/acp Final) knows both stop reasons, but reads only a
// result's stopReason / stop_reason, which the bridge never writes: the
// prompt ends end_turn, so an editor shows a truncated or filtered answer
// as a finished one.
func TestACPOpenAIStopReason(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	s := openACPSession(t, p)
	for _, c := range []struct {
		finish string
		want   acp.StopReason
	}{{"length", acp.StopReasonMaxTokens}, {"content_filter", acp.StopReasonRefusal}} {
		srv.setScript(func(n int, w http.ResponseWriter, _ *http.Request, body chatRequest) bool {
			b := echoStream("chatcmpl-"+c.finish, body.Model, "a cut answ")
			replay(w, bytes.Replace(b, []byte(`"finish_reason":"stop"`), []byte(`"finish_reason":"`+c.finish+`"`), 1))
			return true
		})
		got := s.prompt(t, "write a long essay")
		if got.text != "a cut answ" {
			t.Fatalf("%s: text %q", c.finish, got.text)
		}
		// The E2A final frame of the same answer says so.
		if a := read(t, ask(t, p, "", "e2a-"+c.finish, "write a long essay", nil)); a.result["finish_reason"] != c.finish {
			t.Fatalf("E2A final result %v, want finish_reason %s", a.result, c.finish)
		}
		if got.stop != c.want {
			t.Errorf("stopReason %q for a completion with finish_reason %s, want %q", got.stop, c.finish, c.want)
		}
	}
}

// TestACPOpenAIRefusal: a model's refusal (OpenAI's delta.refusal, its
// finish_reason stop: the refusal fixture) ends the ACP prompt with
// stopReason refusal, its text the agent's message; it ended end_turn, so
// an editor showed a refusal as an answer.
func TestACPOpenAIRefusal(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	got := openACPSession(t, p).prompt(t, "fixture:refusal")
	if got.text != fixtures["refusal"].refusal || got.stop != acp.StopReasonRefusal {
		t.Errorf("text %q stopReason %q, want the refusal and %q", got.text, got.stop, acp.StopReasonRefusal)
	}
}

// TestACPOpenAIEmbeddedContext: the pipeline's ACP initialize
// advertises promptCapabilities.embeddedContext (the agent takes
// ContentBlock::Resource, how an editor attaches a file it @-mentions),
// and every ACP agent must take resource_link blocks. A prompt with a
// text block, an embedded text resource and a resource link reaches the
// model with the text only (bridge.UserText joins the text blocks): the
// file's contents and the link are dropped without a word, and the model
// answers about a file it never saw.
func TestACPOpenAIEmbeddedContext(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	s := openACPSession(t, p)
	const contents = "The launch moved to Tuesday."
	_, err := s.Conn.Prompt(s.Ctx, acp.PromptRequest{SessionId: s.ID, Prompt: []acp.ContentBlock{
		acp.TextBlock("summarize the attached notes"),
		acp.ResourceBlock(acp.EmbeddedResourceResource{TextResourceContents: &acp.TextResourceContents{
			Uri: "file:///work/notes.txt", Text: contents}}),
		acp.ResourceLinkBlock("spec.md", "file:///work/spec.md"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	sent := strings.Join(lastMessages(t, srv), "\n")
	if !strings.Contains(sent, contents) {
		t.Errorf("the model got no embedded resource of the prompt (the file's text %q):\n%s", contents, sent)
	}
	if !strings.Contains(sent, "file:///work/spec.md") {
		t.Errorf("the model got no resource_link of the prompt (file:///work/spec.md):\n%s", sent)
	}
}

// TestACPOpenAICancel: session/cancel while the model streams ends
// the prompt cancelled (the upstream call's context ends); the session's
// next prompt sends the model the completed turn before it, not the
// cancelled one.
func TestACPOpenAICancel(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	s := openACPSession(t, p)
	if got := s.prompt(t, "first"); got.text != "echo: first" {
		t.Fatalf("first: %+v", got)
	}
	upstreamDone := make(chan struct{})
	srv.setScript(func(n int, w http.ResponseWriter, r *http.Request, body chatRequest) bool {
		if body.lastUser() != "slow" {
			return false
		}
		b := echoStream("chatcmpl-slow", body.Model, "tick tock")
		first, _, _ := bytes.Cut(b, []byte("\n\n"))
		second, _, _ := bytes.Cut(b[len(first)+2:], []byte("\n\n"))
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(append(append(first, "\n\n"...), append(second, "\n\n"...)...))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(upstreamDone)
		return true
	})
	s.Rec.CancelMidTurn(t, s.Ctx, s.Conn, s.ID, func() (acp.PromptResponse, error) {
		return s.Conn.Prompt(s.Ctx, acp.PromptRequest{SessionId: s.ID, Prompt: []acp.ContentBlock{acp.TextBlock("slow")}})
	})
	select {
	case <-upstreamDone:
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream call was not ended by the cancel")
	}
	srv.setScript(nil)
	s.Rec.Take(s.ID)
	if got := s.prompt(t, "next"); got.text != "echo: next" {
		t.Fatalf("next: %+v", got)
	}
	wantMessages(t, "after the cancelled prompt", lastMessages(t, srv), "user: first", "assistant: echo: first", "user: next")
}

// TestE2AResumeMidStream: an E2A SSE client of a bridged OpenAI
// request drops its stream after two frames while the model still
// streams; GET …/stream with Last-Event-ID gives every later frame once,
// in order, to the final one.
func TestE2AResumeMidStream(t *testing.T) {
	srv := newModelServer(t)
	p := startBridge(t, srv, setup{})
	release := make(chan struct{})
	words := []string{"one ", "two ", "three ", "four ", "five ", "six"}
	srv.setScript(func(n int, w http.ResponseWriter, r *http.Request, body chatRequest) bool {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		ev := func(delta, finish string) {
			d := `{"content":"` + delta + `"}`
			f := `null`
			if finish != "" {
				d, f = `{}`, `"`+finish+`"`
			}
			_, _ = io.WriteString(w, `data: {"id":"chatcmpl-resume","object":"chat.completion.chunk","created":1767225600,"model":"m",`+
				`"choices":[{"index":0,"delta":`+d+`,"finish_reason":`+f+`}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		for i, wd := range words {
			if i == 3 {
				select {
				case <-release:
				case <-r.Context().Done():
					return true
				}
			}
			ev(wd, "")
		}
		ev("", "stop")
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
		return true
	})
	resp := testkit.Open(t, http.MethodPost, p.URL+"/v1/requests",
		`{"request_id":"rv-resume","method":"chat.send","params":{"content":"count"}}`,
		"Content-Type", "application/json", "Accept", "text/event-stream")
	var got []*e2a.Response
	sc := bufio.NewScanner(resp.Body)
	for len(got) < 2 && sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			f, err := e2a.ResponseFromJSON([]byte(d))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, f)
		}
	}
	resp.Body.Close()
	if len(got) != 2 {
		t.Fatalf("%d frames before the drop", len(got))
	}
	close(release)
	rest := testkit.Open(t, http.MethodGet, p.URL+"/v1/requests/rv-resume/stream", "",
		"Last-Event-ID", strconv.FormatInt(got[1].Sequence, 10))
	defer rest.Body.Close()
	for _, ev := range testkit.Events(testkit.MustReadSSE(t, rest.Body)) {
		f, err := e2a.ResponseFromJSON([]byte(ev.Data))
		if err != nil {
			t.Fatalf("event %s %s: %v", ev.Event, ev.Data, err)
		}
		got = append(got, f)
	}
	var text strings.Builder
	for i, f := range got {
		if f.Sequence != int64(i) {
			t.Fatalf("frame %d has sequence %d (frames %d)", i, f.Sequence, len(got))
		}
		if c, err := f.Chunk(); err == nil && c.DeltaKind == e2a.DeltaText {
			text.WriteString(c.Delta.(string))
		}
	}
	if last := got[len(got)-1]; !last.IsFinal || last.ResponseKind != e2a.KindComplete || text.String() != strings.Join(words, "") {
		t.Fatalf("resumed: text %q, last %s final %v", text.String(), last.ResponseKind, last.IsFinal)
	}
}
