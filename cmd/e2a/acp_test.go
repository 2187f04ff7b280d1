package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/internal/acptest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// e2aBin is the e2a binary built once by TestMain.
var e2aBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "e2a-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	e2aBin = filepath.Join(dir, "e2a")
	build := exec.Command("go", "build", "-o", e2aBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build e2a:", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// jsonLines checks that everything written to it is JSON-RPC, one message
// per line.
type jsonLines struct {
	mu   sync.Mutex
	buf  []byte
	bad  []string
	seen int
}

func (j *jsonLines) Write(p []byte) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.buf = append(j.buf, p...)
	for {
		i := bytes.IndexByte(j.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := j.buf[:i]
		var m struct {
			JSONRPC string `json:"jsonrpc"`
		}
		if json.Unmarshal(line, &m) != nil || m.JSONRPC != "2.0" {
			j.bad = append(j.bad, string(line))
		}
		j.seen++
		j.buf = j.buf[i+1:]
	}
}

// acpProc is `e2a acp` spawned as an editor spawns it, with acp-go-sdk's
// client connected to its stdio (not yet initialized).
type acpProc struct {
	conn   *acp.ClientSideConnection
	rec    *acptest.Recorder
	stdin  io.Closer
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	lines  *jsonLines // every line it wrote to stdout
}

// startACP spawns `e2a acp` with env (the test's own E2A_* variables
// dropped) on an embedded store of its own.
func startACP(t *testing.T, ctx context.Context, env ...string) *acpProc {
	t.Helper()
	return startACPWith(t, ctx, nil, env...)
}

// startACPWith is startACP with the command's arguments after "acp".
func startACPWith(t *testing.T, ctx context.Context, args []string, env ...string) *acpProc {
	t.Helper()
	cmd := exec.CommandContext(ctx, e2aBin, append([]string{"acp"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "E2A_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &acpProc{rec: acptest.NewRecorder(), stdin: stdin, cmd: cmd, stderr: &bytes.Buffer{}, lines: &jsonLines{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("stderr of e2a acp:\n%s", p.stderr.String())
		}
	})
	p.conn = acp.NewClientSideConnection(p.rec, stdin, io.TeeReader(stdout, p.lines))
	return p
}

// open initializes the connection and opens a session (its cwd a temporary
// directory), failing t if either fails; it returns initialize's answer
// and the session's id.
func (p *acpProc) open(t *testing.T, ctx context.Context) (acp.InitializeResponse, acp.SessionId) {
	t.Helper()
	ini, err := p.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	sess, err := p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	return ini, sess.SessionId
}

// stop closes its stdin, as an editor closing the pipe, and waits for it
// to exit cleanly.
func (p *acpProc) stop(t *testing.T) {
	t.Helper()
	_ = p.stdin.Close()
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	if err := testkit.Receive(t, exited, 30*time.Second, "e2a acp did not exit after its stdin closed"); err != nil {
		t.Fatalf("e2a acp exited: %v", err)
	}
}

// TestACPStdioBinary spawns `e2a acp` as an editor does (it embeds its own
// JetStream server and demo agent) and talks to it with acp-go-sdk's
// client: initialize, session/new, a prompt turn, and a cancelled turn.
func TestACPStdioBinary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p := startACP(t, ctx, "E2A_NATS_PORT=0", "E2A_STORE_DIR="+t.TempDir(), "E2A_REQUESTS_MAX_BYTES=67108864", "E2A_LOG_LEVEL=info")
	ed, conn := p.rec, p.conn

	ini, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber,
		ClientCapabilities: acp.ClientCapabilities{Fs: acp.FileSystemCapabilities{ReadTextFile: true}}})
	if err != nil || ini.ProtocolVersion != acp.ProtocolVersionNumber || !ini.AgentCapabilities.LoadSession {
		t.Fatalf("initialize: %+v %v", ini, err)
	}
	sess, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
	if err != nil || sess.SessionId == "" {
		t.Fatalf("session/new: %+v %v", sess, err)
	}
	sid := sess.SessionId

	res, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock("hello from the editor")}})
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v", res, err)
	}
	var kinds []string
	var text strings.Builder
	for _, u := range ed.Take(sid) {
		k := "?"
		switch {
		case u.AgentThoughtChunk != nil:
			k = "agent_thought_chunk"
		case u.ToolCall != nil:
			k = "tool_call"
		case u.ToolCallUpdate != nil:
			k = "tool_call_update"
		case u.AgentMessageChunk != nil:
			k = "agent_message_chunk"
			text.WriteString(u.AgentMessageChunk.Content.Text.Text)
		}
		if len(kinds) == 0 || kinds[len(kinds)-1] != k {
			kinds = append(kinds, k)
		}
	}
	if got := strings.Join(kinds, " "); got != "agent_thought_chunk tool_call tool_call_update agent_message_chunk" {
		t.Fatalf("updates: %s", got)
	}
	if text.String() != "You said: hello from the editor" {
		t.Fatalf("message %q", text.String())
	}

	// Cancel a slow turn after its first update (the demo agent's delay
	// travels in _meta.e2a_params).
	ed.CancelMidTurn(t, ctx, conn, sid, func() (acp.PromptResponse, error) {
		return conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock("take your time")},
			Meta: map[string]any{"e2a_params": map[string]any{"delay_ms": 300}}})
	})

	// The editor closes the pipe: the agent exits cleanly.
	p.stop(t)
	check := p.lines
	check.mu.Lock()
	defer check.mu.Unlock()
	if len(check.bad) > 0 || check.seen < 10 {
		t.Fatalf("stdout: %d lines, not JSON-RPC: %q", check.seen, check.bad)
	}
	if !strings.Contains(p.stderr.String(), "acp: serving on stdio") {
		t.Fatalf("no log on stderr: %s", p.stderr.String())
	}
}

// TestACPLoadAfterRestart: an editor restarts `e2a acp` (same
// E2A_STORE_DIR, so the embedded store persists) and loads a session of
// the previous run, as initialize's loadSession invites: session/load
// replays the prompt and the agent's answer.
func TestACPLoadAfterRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	env := []string{"E2A_NATS_PORT=0", "E2A_STORE_DIR=" + t.TempDir(), "E2A_REQUESTS_MAX_BYTES=67108864"}
	p := startACP(t, ctx, env...)
	conn := p.conn
	if _, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	s, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: "/work", McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("remember me")}}); err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v", res, err)
	}
	p.stop(t)

	p2 := startACP(t, ctx, env...)
	defer p2.stop(t)
	conn2, rec2 := p2.conn, p2.rec
	if _, err := conn2.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn2.LoadSession(ctx, acp.LoadSessionRequest{SessionId: s.SessionId, Cwd: "/work", McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("session/load of the previous run's session: %v", err)
	}
	ups := rec2.Take(s.SessionId)
	user := ""
	for _, u := range ups {
		if u.UserMessageChunk != nil && u.UserMessageChunk.Content.Text != nil {
			user += u.UserMessageChunk.Content.Text.Text
		}
	}
	if user != "remember me" || acptest.Said(ups) != "You said: remember me" {
		t.Errorf("replay after restart: user %q, agent %q", user, acptest.Said(ups))
	}
}
