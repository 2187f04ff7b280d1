package acptest

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// Session is one ACP session of acp-go-sdk's client (OpenStdio): its
// connection, the Recorder of its updates, its id, and the context its
// calls take (it ends with the test, 60 s at most).
type Session struct {
	Ctx  context.Context
	Conn *acp.ClientSideConnection
	Rec  *Recorder
	ID   acp.SessionId
}

// OpenStdio serves ACP with serve over a pair of pipes, as `e2a acp` does
// over stdio (serve is ingress.ServeACPStdio of a pipeline's server), to
// acp-go-sdk's client, initializes it and opens a session. Everything ends
// with the test.
func OpenStdio(t testing.TB, serve func(ctx context.Context, in io.Reader, out io.Writer) error) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() { defer close(done); _ = serve(ctx, inR, outW); _ = outW.Close() }()
	t.Cleanup(func() { _ = inW.Close(); cancel(); <-done })
	rec := NewRecorder()
	conn := acp.NewClientSideConnection(rec, inW, outR)
	if _, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	s, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: "/work", McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	return &Session{Ctx: ctx, Conn: conn, Rec: rec, ID: s.SessionId}
}

// Prompt sends text as the session's next prompt and returns its stop
// reason and the agent's message text of it (the updates it took).
func (s *Session) Prompt(t testing.TB, text string) (acp.StopReason, string) {
	t.Helper()
	res, err := s.Conn.Prompt(s.Ctx, acp.PromptRequest{SessionId: s.ID, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
	if err != nil {
		t.Fatalf("prompt %q: %v", text, err)
	}
	return res.StopReason, Said(s.Rec.Take(s.ID))
}

// Said is the agent's message text of updates.
func Said(updates []acp.SessionUpdate) string {
	var b strings.Builder
	for _, u := range updates {
		if u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil {
			b.WriteString(u.AgentMessageChunk.Content.Text.Text)
		}
	}
	return b.String()
}
