package ingress_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/acptest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// reviewBridged starts a2aupstream's a2a-go/v2 agent (JSON-RPC,
// streaming) and a pipeline whose default pool "agent" is the A2A bridge
// to it.
func bridgedAsker(t *testing.T) (*up.Server, *pipetest.Pipeline) {
	t.Helper()
	srv := up.Start(t, up.Options{Binding: up.JSONRPC, SlowInterval: 20 * time.Millisecond, SlowChunks: 1500})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("agent")))
	ctx := context.Background()
	client, err := bridge.NewClient(srv.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	conv, err := bridge.OpenConversations(ctx, p.JS, streams.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	u, err := a2abridge.New(ctx, client, a2abridge.WithConversations("agent", conv), a2abridge.WithPollInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Close() })
	h, err := bridge.New("agent", u, bridge.WithRetry(2, 5*time.Millisecond, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	p.Pool("agent", h)
	return srv, p
}

// reviewExecution is the upstream task of srv's turn that received text.
func upstreamExecution(srv *up.Server, text string) (task string, continued bool) {
	for _, e := range srv.Executions() {
		if e.Message != nil && up.TextOf(e.Message.Parts) == text {
			return string(e.TaskID), e.Continued
		}
	}
	return "", false
}

// bridgedACP opens an ACP session of acp-go-sdk's client over stdio with p.
func bridgedACP(t *testing.T, p *pipetest.Pipeline) (context.Context, *acp.ClientSideConnection, *acptest.Recorder, acp.SessionId) {
	t.Helper()
	s := acptest.OpenStdio(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return ingress.ServeACPStdio(ctx, in, out, p.Ingress)
	})
	return s.Ctx, s.Conn, s.Rec, s.ID
}

// TestACPCancelAfterBridgedQuestion: a bridged A2A agent asks a
// question over ACP (the prompt ends end_turn with the question); a
// session/cancel then has nothing running (ACP has no interrupted state):
// it must not cancel the agent's task, and the next prompt is the answer,
// continuing the upstream task that asked.
func TestACPCancelAfterBridgedQuestion(t *testing.T) {
	srv, p := bridgedAsker(t)
	ctx, conn, rec, sid := bridgedACP(t, p)
	prompt := func(text string) (acp.StopReason, string) {
		t.Helper()
		res, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
		if err != nil {
			t.Fatalf("prompt %q: %v", text, err)
		}
		return res.StopReason, acptest.Said(rec.Take(sid))
	}
	if stop, said := prompt("ask: review"); stop != acp.StopReasonEndTurn || said != up.AskChunk+"\n\n"+up.AskQuestion {
		t.Fatalf("the question: %s %q, want end_turn %q", stop, said, up.AskChunk+"\n\n"+up.AskQuestion)
	}
	if err := conn.Cancel(ctx, acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	if stop, said := prompt("Ada"); stop != acp.StopReasonEndTurn || said != up.AskReply("Ada") {
		t.Errorf("the answer after session/cancel: %s %q, want end_turn with %q", stop, said, up.AskReply("Ada"))
	}
	asked, _ := upstreamExecution(srv, "ask: review")
	answered, continued := upstreamExecution(srv, "Ada")
	if asked == "" || answered != asked || !continued {
		t.Errorf("the answer reached upstream task %q (continued %v); the question came from %q", answered, continued, asked)
	}
	if c := srv.Cancels(); slices.Contains(c, a2a.TaskID(asked)) {
		t.Errorf("session/cancel with nothing running cancelled the agent's interrupted task %s (cancels %v)", asked, c)
	}
	// auth-required the same way: the prompt ends with the agent's
	// request, a cancel with nothing running changes nothing, the next
	// prompt is the credentials.
	if stop, said := prompt("auth: review"); stop != acp.StopReasonEndTurn || said != up.AuthPrompt {
		t.Fatalf("auth: %s %q, want end_turn %q", stop, said, up.AuthPrompt)
	}
	if err := conn.Cancel(ctx, acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	if stop, said := prompt("the token"); stop != acp.StopReasonEndTurn || said != up.AuthReply("the token") {
		t.Errorf("after auth: %s %q, want end_turn %q", stop, said, up.AuthReply("the token"))
	}
	// session/load on another connection replays the session: each
	// prompt as user_message_chunk, the agent's question and answers.
	ctx2, conn2, rec2, _ := bridgedACP(t, p)
	if _, err := conn2.LoadSession(ctx2, acp.LoadSessionRequest{SessionId: sid, Cwd: "/work", McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("session/load: %v", err)
	}
	var replay []string
	for _, u := range rec2.Take(sid) {
		switch {
		case u.UserMessageChunk != nil && u.UserMessageChunk.Content.Text != nil:
			replay = append(replay, "user: "+u.UserMessageChunk.Content.Text.Text)
		case u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil:
			replay = append(replay, "agent: "+u.AgentMessageChunk.Content.Text.Text)
		}
	}
	want := []string{"user: ask: review", "agent: " + up.AskChunk, "agent: \n\n" + up.AskQuestion, "user: Ada", "agent: " + up.AskReply("Ada"),
		"user: auth: review", "agent: " + up.AuthPrompt, "user: the token", "agent: " + up.AuthReply("the token")}
	if !slices.Equal(replay, want) {
		t.Errorf("session/load replay\n%s\nwant\n%s", strings.Join(replay, "\n"), strings.Join(want, "\n"))
	}
}

// TestE2ABridgedInterruptRenderings: a bridged A2A agent's question
// and auth request in E2A's NDJSON (the frames, the last the interrupt
// with the agent's question) and JSON ?wait=true (state input-required /
// auth-required) renderings; GET /v1/requests/{id} after it; the answer
// naming the task continues the upstream task.
func TestE2ABridgedInterruptRenderings(t *testing.T) {
	srv, p := bridgedAsker(t)
	resp, body := bridgedDo(t, http.MethodPost, p.URL+"/v1/requests",
		`{"request_id":"rv-ask","task_id":"rv-task","params":{"text":"ask: ndjson"}}`, "Accept", "application/x-ndjson")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		t.Fatalf("NDJSON: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var frames []*e2a.Response
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		f, err := e2a.ResponseFromJSON(sc.Bytes())
		if err != nil {
			t.Fatalf("NDJSON line %s: %v", sc.Text(), err)
		}
		frames = append(frames, f)
	}
	for i, f := range frames {
		if f.Sequence != int64(i) {
			t.Fatalf("NDJSON frame %d has sequence %d", i, f.Sequence)
		}
	}
	if n := len(frames); n == 0 {
		t.Fatal("NDJSON: no frame")
	} else if st, q, ok := frames[n-1].Interrupt(); !ok || st != e2a.StateInputRequired || q != up.AskQuestion {
		t.Fatalf("NDJSON final frame %s: %q %q %v", frames[n-1].Body, st, q, ok)
	}
	var view egress.RequestView
	if r, b := bridgedDo(t, http.MethodGet, p.URL+"/v1/requests/rv-ask", ""); r.StatusCode != 200 || json.Unmarshal([]byte(b), &view) != nil ||
		view.State != egress.StateInputRequired || len(view.Frames) != len(frames) {
		t.Fatalf("GET: %d %s", r.StatusCode, b)
	}
	if r, b := bridgedDo(t, http.MethodPost, p.URL+"/v1/requests?wait=true",
		`{"request_id":"rv-auth","params":{"text":"auth: json"}}`); json.Unmarshal([]byte(b), &view) != nil ||
		view.State != egress.StateAuthRequired {
		t.Fatalf("JSON ?wait=true, asking for auth: %d %s", r.StatusCode, b)
	} else {
		last, err := e2a.ResponseFromJSON(view.Frames[len(view.Frames)-1])
		if err != nil {
			t.Fatal(err)
		}
		if st, msg, ok := last.Interrupt(); !ok || st != e2a.StateAuthRequired || msg != up.AuthPrompt {
			t.Fatalf("JSON final frame: %q %q %v", st, msg, ok)
		}
	}
	if r, b := bridgedDo(t, http.MethodPost, p.URL+"/v1/requests?wait=true",
		`{"request_id":"rv-answer","task_id":"rv-task","params":{"text":"Grace"}}`); json.Unmarshal([]byte(b), &view) != nil ||
		view.State != egress.StateSucceeded || !strings.Contains(b, up.AskReply("Grace")) {
		t.Fatalf("the answer: %d %s", r.StatusCode, b)
	}
	asked, _ := upstreamExecution(srv, "ask: ndjson")
	answered, continued := upstreamExecution(srv, "Grace")
	if asked == "" || answered != asked || !continued {
		t.Errorf("the answer reached upstream task %q (continued %v); the question came from %q", answered, continued, asked)
	}
}

// reviewDo sends a request (JSON body when set) and returns its answer.
func bridgedDo(t *testing.T, method, url, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	if body != "" {
		headers = append([]string{"Content-Type", "application/json"}, headers...)
	}
	resp, b := testkit.Do(t, method, url, body, headers...)
	return resp, string(b)
}
