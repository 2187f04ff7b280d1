package main

// README.md, docs/agents.md and docs/operations.md as a new
// user reads them: each test holds one claim against what the code does.

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestREADMEMetricsAddrEveryProcess: the README (Operations) says every
// process, `e2a push` and `e2a archive` included, serves /metrics "on
// E2A_METRICS_ADDR alone when that is set". `e2a push` served /metrics on
// E2A_HTTP_ADDR as well (its operations mux was not mounted through
// mountOps): metrics an operator moved off the public listener stayed
// public there.
func TestREADMEMetricsAddrEveryProcess(t *testing.T) {
	srv, _ := natstest.RunServer(t)
	for _, c := range []struct {
		args    []string
		running string // the log line naming the operations listener ("ops")
	}{
		{[]string{"push"}, "push notification stage running"},
		{[]string{"archive"}, "archiver running"},
	} {
		t.Run(c.args[0], func(t *testing.T) {
			env := []string{"E2A_NATS_URL=" + srv.ClientURL(), "E2A_HTTP_ADDR=127.0.0.1:0", "E2A_METRICS_ADDR=127.0.0.1:0",
				"E2A_LOG_FORMAT=json", "E2A_LOG_LEVEL=info", "GOGC="}
			_, stderr := startBin(t, env, c.args...)
			main, metrics := splitAddrs(t, stderr, c.running)
			checkSplit(t, main, metrics)
		})
	}
}

// TestREADMEConfigEmbeddedMaxPayload: docs/configuration.md (the README's
// "full table") states the embedded server's max_payload, over which an
// envelope is 413, as the embedded server of `e2a dev` (and of `e2a
// agent`/`e2a acp` without E2A_NATS_URL) runs it. It said "1 MiB by default,
// embedded server included" where the server runs with 8 MiB: a 2 MiB body
// the doc said was refused was accepted (202).
func TestREADMEConfigEmbeddedMaxPayload(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "| `E2A_MAX_BODY_BYTES`") {
			row = l
		}
	}
	m := regexp.MustCompile("`e2a dev`'s embedded one: (\\d+) MiB").FindStringSubmatch(row)
	if m == nil {
		t.Fatalf("the E2A_MAX_BODY_BYTES row no longer states the embedded server's max_payload: %q", row)
	}
	docMiB, _ := strconv.Atoi(m[1])
	t.Setenv("E2A_NATS_URL", "")
	t.Setenv("E2A_NATS_PORT", "0")
	t.Setenv("E2A_STORE_DIR", t.TempDir())
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	nc, stop, _, err := connectOrEmbed(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if got := nc.MaxPayload(); got != int64(docMiB)<<20 {
		t.Errorf("the embedded server's max_payload is %d bytes (%d MiB); docs/configuration.md says %d MiB", got, got>>20, docMiB)
	}
}

// TestREADMEConfigTableDefaults: every variable of the README's
// Configuration table that Config reads with a default shows that default
// (docs/configuration.md is checked by TestConfigDefaultsMatchDocs; the
// README keeps a table of its own).
func TestREADMEConfigTableDefaults(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var vars, defaults []string
	for _, l := range strings.Split(string(b), "\n") {
		if cells := strings.Split(l, "|"); strings.HasPrefix(l, "| `E2A_") && len(cells) > 3 {
			vars, defaults = append(vars, cells[1]), append(defaults, cells[2])
		}
	}
	if len(vars) < 10 {
		t.Fatalf("only %d rows in the README's Configuration table: the parse is broken", len(vars))
	}
	checked := 0
	for name, def := range cfgEnvTags(Config{}) {
		cell, ok := cfgDocLine(vars, name)
		if !ok || def == "" {
			continue
		}
		checked++
		i := 0
		for i < len(vars) && vars[i] != cell {
			i++
		}
		if !strings.Contains(defaults[i], "`"+def+"`") {
			t.Errorf("%s: default %q, the README's default column says %q", name, def, defaults[i])
		}
	}
	if checked < 6 {
		t.Errorf("only %d defaults compared: the parse is broken", checked)
	}
}
