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

// TestACPStdioBinary spawns `e2a acp` as an editor does (it embeds its own
// JetStream server and demo agent) and talks to it with acp-go-sdk's
// client: initialize, session/new, a prompt turn, and a cancelled turn.
func TestACPStdioBinary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2aBin, "acp")
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "E2A_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "E2A_NATS_PORT=0", "E2A_STORE_DIR="+t.TempDir(), "E2A_REQUESTS_MAX_BYTES=67108864", "E2A_LOG_LEVEL=info")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var check jsonLines
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("stderr of e2a acp:\n%s", stderr.String())
		}
	})

	ed := acptest.NewRecorder()
	conn := acp.NewClientSideConnection(ed, stdin, io.TeeReader(stdout, &check))

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
	_ = stdin.Close()
	go func() { exited <- cmd.Wait() }()
	err = testkit.Receive(t, exited, 30*time.Second, "e2a acp did not exit after its stdin closed")
	if err != nil {
		t.Fatalf("e2a acp exited: %v", err)
	}
	check.mu.Lock()
	defer check.mu.Unlock()
	if len(check.bad) > 0 || check.seen < 10 {
		t.Fatalf("stdout: %d lines, not JSON-RPC: %q", check.seen, check.bad)
	}
	if !strings.Contains(stderr.String(), "acp: serving on stdio") {
		t.Fatalf("no log on stderr: %s", stderr.String())
	}
}
