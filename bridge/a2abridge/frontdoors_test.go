package a2abridge_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2aclient03 "github.com/a2aproject/a2a-go/a2aclient"
	agentcard03 "github.com/a2aproject/a2a-go/a2aclient/agentcard"
	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/acptest"
	"github.com/e2a-pipeline/pipeline/internal/jsupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestFrontDoors: agents behind the bridge seen from the other front
// doors: the a2a-go v0.3 client from the pool's card, ACP (acp-go-sdk over
// stdio: a question asked in one prompt, answered by the next, reaching the
// same upstream task), and an @a2a-js/sdk 1.3 agent in Node over E2A (a
// stream, then an ask answered in the same E2A session).
func TestFrontDoors(t *testing.T) {
	t.Parallel()
	goAgent := up.Start(t, up.Options{Binding: up.JSONRPC})
	jsAgent := jsupstream.Start(t, jsupstream.Options{})
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("go")))
	bridgePool(t, p, "go", goAgent.BaseURL())
	bridgePool(t, p, "js", jsAgent.BaseURL())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// A2A v0.3.
	card03, err := agentcard03.DefaultResolver.Resolve(ctx, p.URL+"/pools/go")
	if err != nil {
		t.Fatal(err)
	}
	c03, err := a2aclient03.NewFromCard(ctx, card03)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c03.SendMessage(ctx, &a2a03.MessageSendParams{Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "stream: v03"})})
	if err != nil {
		t.Fatal(err)
	}
	var got string
	switch r := res.(type) {
	case *a2a03.Task:
		for _, a := range r.Artifacts {
			for _, part := range a.Parts {
				if tp, ok := part.(a2a03.TextPart); ok && tp.Metadata["thought"] != true {
					got += tp.Text
				}
			}
		}
	case *a2a03.Message:
		for _, part := range r.Parts {
			if tp, ok := part.(a2a03.TextPart); ok {
				got += tp.Text
			}
		}
	}
	if !strings.Contains(got, up.StreamText("v03")) {
		t.Errorf("A2A v0.3 answer %q, want %q in it", got, up.StreamText("v03"))
	}

	// ACP over stdio (the default pool, go): ask, then answer.
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() { _ = ingress.ServeACPStdio(ctx, inR, outW, p.Ingress); _ = outW.Close() }()
	defer inW.Close()
	rec := acptest.NewRecorder()
	conn := acp.NewClientSideConnection(rec, inW, outR)
	if _, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	s, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: "/work", McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	prompt := func(text string) string {
		t.Helper()
		res, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
		if err != nil || res.StopReason != acp.StopReasonEndTurn {
			t.Fatalf("prompt %q: %+v %v", text, res, err)
		}
		var b strings.Builder
		for _, u := range rec.Take(s.SessionId) {
			if u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil {
				b.WriteString(u.AgentMessageChunk.Content.Text.Text)
			}
		}
		return b.String()
	}
	if said := prompt("ask: acp"); !strings.Contains(said, up.AskQuestion) {
		t.Errorf("ACP: the question %q is not in %q", up.AskQuestion, said)
	}
	asked := goAgent.LastMessage()
	if said := prompt("Grace"); !strings.Contains(said, up.AskReply("Grace")) {
		t.Errorf("ACP: the reply %q is not in %q", up.AskReply("Grace"), said)
	}
	if last := goAgent.LastMessage(); asked == nil || last.TaskID == "" {
		t.Errorf("ACP: the answer named no upstream task")
	}

	// The JavaScript agent over E2A: a stream, then an ask answered in the
	// same session.
	a := p.Ask(t, "js", `{"params":{"text":"stream: node"}}`)
	if got := a.Text(e2a.DeltaText); got != up.StreamText("node") {
		t.Errorf("JS stream %q, want %q", got, up.StreamText("node"))
	}
	a = p.Ask(t, "js", `{"session_id":"js-s1","params":{"text":"ask: js"}}`)
	if st, q, ok := a.Final().Interrupt(); !ok || st != e2a.StateInputRequired || q != up.AskQuestion {
		t.Errorf("JS ask: %v %q %q (state %q)", ok, st, q, a.State)
	}
	a = p.Ask(t, "js", `{"session_id":"js-s1","params":{"text":"Linus"}}`)
	if got := a.Text(e2a.DeltaText); !strings.Contains(got, up.AskReply("Linus")) {
		t.Errorf("JS answer %q, want %q in it", got, up.AskReply("Linus"))
	}
}
