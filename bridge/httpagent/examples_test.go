package httpagent_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2aclient03 "github.com/a2aproject/a2a-go/a2aclient"
	agentcard03 "github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2a"
	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/acptest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/proctest"
)

// TestExamples: the README's smallest agents (examples/httpagent: Python's
// http.server with Debian's python3, Node's node:http) behind the bridge
// answer every front door: E2A SSE with resume, A2A v1.0 (a2a-go/v2 from
// the pool's card), A2A v0.3 (a2a-go), ACP (acp-go-sdk over stdio).
func TestExamples(t *testing.T) {
	t.Parallel()
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("py")))
	bridgePool(t, p, "py", startExample(t, proctest.Python3(t), "agent.py"))
	bridgePool(t, p, "js", startExample(t, proctest.Node(t), "agent.mjs"))
	for _, c := range []struct{ pool, who string }{{"py", "Python"}, {"js", "Node"}} {
		t.Run(c.pool, func(t *testing.T) {
			// E2A, streamed, then resumed after frame 1.
			req, _ := http.NewRequest(http.MethodPost, p.URL+"/pools/"+c.pool+"/v1/requests",
				strings.NewReader(`{"request_id":"ex-`+c.pool+`","params":{"text":"hello there"}}`))
			req.Header.Set("Accept", "text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			frames := sseFrames(t, resp.Body)
			resp.Body.Close()
			got := pipetest.Answer{Frames: frames}
			if want := c.who + " heard: hello there "; got.Text(e2a.DeltaText) != want {
				t.Errorf("E2A text %q, want %q", got.Text(e2a.DeltaText), want)
			}
			if f := got.Final(); f == nil || f.ResponseKind != "e2a.complete" || !strings.Contains(string(f.Body), `"words":2`) {
				t.Errorf("E2A final frame %+v", f)
			}
			req, _ = http.NewRequest(http.MethodGet, p.URL+"/v1/requests/ex-"+c.pool+"/stream", nil)
			req.Header.Set("Last-Event-ID", "1")
			resp, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			rest := sseFrames(t, resp.Body)
			resp.Body.Close()
			if len(rest) != len(frames)-2 || rest[0].Sequence != 2 {
				t.Errorf("resume after 1: %d frames from %d, want %d from 2", len(rest), rest[0].Sequence, len(frames)-2)
			}

			// Turns of one E2A session: the second's POST carries the
			// first in its history member, which the example ignores.
			for _, text := range []string{"first turn", "second turn"} {
				a := p.Ask(t, c.pool, `{"session_id":"ex-session-`+c.pool+`","params":{"text":"`+text+`"}}`)
				if want := c.who + " heard: " + text + " "; a.Text(e2a.DeltaText) != want {
					t.Errorf("session turn: E2A text %q, want %q", a.Text(e2a.DeltaText), want)
				}
			}

			if got := a2aV1Answer(t, p, c.pool, "hi v1"); !strings.Contains(got, c.who+" heard: hi v1") {
				t.Errorf("A2A v1.0 answer %q", got)
			}
			if got := a2aV03Answer(t, p, c.pool, "hi v03"); !strings.Contains(got, c.who+" heard: hi v03") {
				t.Errorf("A2A v0.3 answer %q", got)
			}
		})
	}

	// ACP over stdio, to the default pool (py).
	if got := acpAnswer(t, p, "hi acp"); !strings.Contains(got, "Python heard: hi acp") {
		t.Errorf("ACP agent messages %q", got)
	}
}

// a2aV1Answer sends text to pool from a2a-go/v2's client made from the
// pool's card and returns the text of its answer (v1Text).
func a2aV1Answer(t *testing.T, p *pipetest.Pipeline, pool, text string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := a2aupstream.Client(t, p.URL+"/pools/"+pool).SendMessage(ctx,
		&a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))})
	if err != nil {
		t.Fatal(err)
	}
	return v1Text(res)
}

// a2aV03Answer is a2aV1Answer with a2a-go's v0.3 client.
func a2aV03Answer(t *testing.T, p *pipetest.Pipeline, pool, text string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	card03, err := agentcard03.DefaultResolver.Resolve(ctx, p.URL+"/pools/"+pool)
	if err != nil {
		t.Fatal(err)
	}
	cl03, err := a2aclient03.NewFromCard(ctx, card03)
	if err != nil {
		t.Fatal(err)
	}
	res03, err := cl03.SendMessage(ctx, &a2a03.MessageSendParams{Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: text})})
	if err != nil {
		t.Fatal(err)
	}
	return v03Text(res03)
}

// acpAnswer prompts p's default pool with text from acp-go-sdk over stdio
// and returns its agent_message_chunk text; the turn must end end_turn.
func acpAnswer(t *testing.T, p *pipetest.Pipeline, text string) string {
	t.Helper()
	s := acptest.OpenStdio(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return ingress.ServeACPStdio(ctx, in, out, p.Ingress)
	})
	pr, err := s.Conn.Prompt(s.Ctx, acp.PromptRequest{SessionId: s.ID, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
	if err != nil || pr.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("ACP prompt: %+v %v", pr, err)
	}
	var said strings.Builder
	for _, u := range s.Rec.Take(s.ID) {
		if u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil {
			said.WriteString(u.AgentMessageChunk.Content.Text.Text)
		}
	}
	return said.String()
}

func v1Text(res a2a.SendMessageResult) string {
	var parts a2a.ContentParts
	switch r := res.(type) {
	case *a2a.Message:
		parts = r.Parts
	case *a2a.Task:
		for _, a := range r.Artifacts {
			parts = append(parts, a.Parts...)
		}
	}
	var b strings.Builder
	for _, p := range parts {
		if th, _ := p.Metadata["thought"].(bool); !th {
			b.WriteString(p.Text())
		}
	}
	return b.String()
}

func v03Text(res a2a03.SendMessageResult) string {
	var parts a2a03.ContentParts
	switch r := res.(type) {
	case *a2a03.Message:
		parts = r.Parts
	case *a2a03.Task:
		for _, a := range r.Artifacts {
			parts = append(parts, a.Parts...)
		}
	}
	var b strings.Builder
	for _, p := range parts {
		if tp, ok := p.(a2a03.TextPart); ok {
			b.WriteString(tp.Text)
		}
	}
	return b.String()
}

// TestExamplesOddInput: the examples take what the E2A door accepts and
// the bridge posts as it is. A params.text that is no string, a prompt
// that is no array, a null prompt block: the Node example threw in its
// 'end' handler, its process exited and every later request of the pool
// failed upstream_unreachable; the Python one closed that answer
// mid-stream (retryable, though a retry fails the same way). Both answer
// them, and the next request too. A large non-ASCII text comes back whole:
// the Node example decoded each chunk of the body alone (`body += c`), a
// character split between two reads became U+FFFD.
func TestExamplesOddInput(t *testing.T) {
	t.Parallel()
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("py")))
	bridgePool(t, p, "py", startExample(t, proctest.Python3(t), "agent.py"))
	bridgePool(t, p, "js", startExample(t, proctest.Node(t), "agent.mjs"))
	big := strings.Repeat("日本語のテキスト", 12000) + " end"
	for _, c := range []struct{ pool, who string }{{"py", "Python"}, {"js", "Node"}} {
		t.Run(c.pool, func(t *testing.T) {
			for _, params := range []string{`{"text":5}`, `{"prompt":"x"}`, `{"prompt":[null,{"type":"text","text":7}]}`, `{"text":null}`} {
				a := p.Ask(t, c.pool, `{"params":`+params+`}`)
				if f := a.Final(); f == nil || f.ResponseKind != "e2a.complete" {
					t.Errorf("params %s: final frame %+v", params, f)
				}
			}
			b, _ := json.Marshal(map[string]any{"params": map[string]any{"text": big}})
			a := p.Ask(t, c.pool, string(b))
			if got, want := a.Text(e2a.DeltaText), c.who+" heard: "+big+" "; got != want {
				t.Errorf("a %d-byte text came back as %d bytes with %d U+FFFD", len(want), len(got), strings.Count(got, "\uFFFD"))
			}
		})
	}
}
