package main

// What the CLI prints, word for word where a user reads it (session 45,
// brief h20): counts in the right number, and lists that agree with what
// the commands do.

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestReplaySummarySingular: `e2a replay` of one request with one frame
// says "1 request" and "1 frame"; it printed "1 requests", "1 frames".
func TestReplaySummarySingular(t *testing.T) {
	cfg, nc := auditEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	natstest.PublishBurst(t, nc, "single-1", 0, 0, natstest.Frame("single-1", 0, true))
	for _, c := range []struct {
		id   string
		want string
	}{
		{"single-1", `^replay: 1 request \(.*\), 1 frame, `},
		{"no-such-request", `^replay: 1 request \(0 complete, 0 incomplete, 0 without frames, 1 not found\), 0 frames, 0 with violations\n$`},
	} {
		var out, errOut bytes.Buffer
		_ = runReplay(ctx, cfg, []string{"--source", "hot", c.id}, &out, &errOut)
		if !regexp.MustCompile(c.want).MatchString(errOut.String()) {
			t.Errorf("e2a replay %s: summary %q, want %s", c.id, errOut.String(), c.want)
		}
	}
}

// TestBuiltinAgentsListedAlike: `e2a help`, `e2a agent -h` and the refusal
// of a pool without an agent name the same built-in agents; the help said
// "demo, workflow", leaving out tck and tck-basic, which the refusal
// named.
func TestBuiltinAgentsListedAlike(t *testing.T) {
	env := []string{"E2A_NATS_URL="}
	_, out, _ := runBin(t, env, "help")
	m := regexp.MustCompile(`run a built-in agent pool \(([^)]*)\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("e2a help names no built-in agents:\n%s", out)
	}
	helpList := m[1]
	code, _, errOut := runBin(t, env, "agent", "--pool", "nobody-here")
	r := regexp.MustCompile(`\(built-in: ([^;]*);`).FindStringSubmatch(errOut)
	if code != exitUsage || r == nil {
		t.Fatalf("e2a agent --pool nobody-here: exit %d, no built-in list: %s", code, errOut)
	}
	if helpList != r[1] {
		t.Errorf("e2a help lists the built-in agents as %q, e2a agent's refusal as %q", helpList, r[1])
	}
	_, agentHelp, _ := runBin(t, env, "agent", "-h")
	if want := "[--pool " + strings.ReplaceAll(r[1], ", ", "|") + "]"; !strings.Contains(agentHelp, want) {
		t.Errorf("e2a agent -h does not show %s:\n%s", want, agentHelp)
	}
}
