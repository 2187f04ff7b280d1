package a2abridge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/jsupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// startAsIsAgent runs testdata/asis_agent.mjs, an @a2a-js/sdk agent that
// opens a follow-up turn with the stored task as is (the SDK wants a
// task event first; internal/jsupstream's agent publishes it in working
// instead), and returns its base URL. Like jsupstream.Start, it skips
// the test without node, except under CI=true.
func startAsIsAgent(t *testing.T, args ...string) string {
	t.Helper()
	jsupstream.RunScript(t, "") // node there, the pinned SDK installed
	script, err := os.ReadFile("testdata/asis_agent.mjs")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", append([]string{"--input-type=module", "-e", string(script), "--"}, args...)...)
	cmd.Dir = jsupstream.Dir()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n') // EOF when node exits first
	var v struct{ URL string }
	if err := json.Unmarshal([]byte(line), &v); err != nil || v.URL == "" {
		t.Fatalf("asis_agent.mjs printed %q (%v): %s", line, err, stderr.String())
	}
	return v.URL
}

// TestContinuationOpensWithStoredTask: a JavaScript agent opens the
// follow-up turn (the answer to its question) with the stored task as
// is, still input-required with the question it asked, and then works
// and completes. That first event is not the turn's end: the turn
// completes with the agent's reply. The bridge ended it at once,
// interrupted again with the earlier turn's question (the reply, which
// followed on the stream, never written), streaming and polled alike.
func TestContinuationOpensWithStoredTask(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name string
		args []string
	}{{"stream", nil}, {"polled", []string{"--no-streaming"}}} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			url := startAsIsAgent(t, v.args...)
			p := pipetest.Start(t)
			bridgePool(t, p, "agent", url)
			askThenAnswer(t, p)
		})
	}
}
