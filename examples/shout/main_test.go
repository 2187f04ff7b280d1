package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestShout runs the example's own run function on a real JetStream server
// and reads the agent's frames: what the README shows is what runs.
func TestShout(t *testing.T) {
	srv, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, srv.ClientURL(), "127.0.0.1:18080", "shout", slog.New(slog.NewJSONHandler(&logs, nil)))
	}()
	t.Cleanup(func() { cancel(); <-done })

	live, _ := subjects.Live("shout-1")
	sub, err := nc.SubscribeSync(live)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := subjects.Request("shout", "shout-1")
	body, _ := json.Marshal(e2a.Envelope{RequestID: "shout-1", Params: map[string]any{"text": "hello from the pipeline"}})
	pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer pcancel()
	if _, err := js.PublishMsg(pctx, &nats.Msg{Subject: req, Data: body}, jetstream.WithMsgID("shout-1")); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("frames: %v (logs: %s)", err, logs.String())
		}
		// One frame, or a burst of them (E2A-Frames).
		burst, err := e2a.BurstResponses(m.Header.Get(subjects.HeaderFrames), m.Data)
		if err != nil {
			t.Fatal(err)
		}
		f := burst[len(burst)-1]
		for _, g := range burst {
			if c, err := g.Chunk(); err == nil {
				text.WriteString(c.Delta.(string))
			}
		}
		if f.IsFinal {
			if got := strings.TrimSpace(text.String()); got != "HELLO FROM THE PIPELINE" || f.Status != e2a.StatusSucceeded {
				t.Fatalf("streamed %q, final %s", got, f.Status)
			}
			break
		}
	}
	if !strings.Contains(logs.String(), `"msg":"agent serving","pool":"shout"`) {
		t.Errorf("no start line naming the pool: %s", logs.String())
	}
	if !strings.Contains(logs.String(), "curl -N '127.0.0.1:18080/v1/requests?agent=shout'") {
		t.Errorf("the start line's hint does not name the HTTP address given: %s", logs.String())
	}
}

// TestREADMEShowsTheExample: the README's "Write your own agent" program is
// this file, character for character.
func TestREADMEShowsTheExample(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, []byte("```go\n"+string(src)+"```\n")) {
		t.Fatal("README.md's agent example differs from examples/shout/main.go: paste the file into the README")
	}
}

// TestMainHintBesideAgentExport runs main, as `go run ./examples/shout`
// does, in a terminal holding the README's export for `e2a agent`
// (E2A_HTTP_ADDR=127.0.0.1:0, an operations port of its own): the start
// line's hint names e2a dev's default address, not port 0, which no curl
// reaches.
func TestMainHintBesideAgentExport(t *testing.T) {
	if os.Getenv("SHOUT_RUN_MAIN") == "1" {
		main()
		return
	}
	srv, _ := natstest.RunServer(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestMainHintBesideAgentExport$")
	cmd.Env = append(os.Environ(), "SHOUT_RUN_MAIN=1", "E2A_NATS_URL="+srv.ClientURL(), "E2A_HTTP_ADDR=127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil {
		t.Fatalf("start line: %q %v", line, err)
	}
	if !strings.Contains(line, "agent serving pool=shout") || !strings.Contains(line, "curl -N 'localhost:8080/v1/requests?agent=shout'") {
		t.Fatalf("start line %q, want its hint on localhost:8080", line)
	}
}
