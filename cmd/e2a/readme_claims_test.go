package main

// README.md, docs/agents.md and docs/operations.md as a new
// user reads them: each test holds one claim against what the code does.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/proctest"
	"github.com/e2a-pipeline/pipeline/streams"
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
			env := joinEnv(srv.ClientURL(), "E2A_METRICS_ADDR=127.0.0.1:0",
				"E2A_LOG_FORMAT=json", "E2A_LOG_LEVEL=info", "GOGC=")
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
	nc, stop, _, err := connectOrEmbed(context.Background(), cfg, slog.New(slog.DiscardHandler), streams.NewConnEvents(slog.New(slog.DiscardHandler)), false)
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

// TestREADMEAgentBesideDevNamesNATSURL: the README's "Bring your own agent"
// runs `e2a agent` beside `e2a dev`, one terminal per pool, with
// E2A_NATS_URL exported. A new terminal has no such export: the agent then
// starts an embedded server on the port `e2a dev` holds, and its error said
// only "set E2A_NATS_PORT to another port, or 0 for a random one". Followed,
// that ran the agent on a NATS server of its own, and `e2a dev` answered its
// pool's requests 404 unknown_agent. The error names the variable that
// joins the server already there.
func TestREADMEAgentBesideDevNamesNATSURL(t *testing.T) {
	srv, _ := natstest.RunServer(t) // e2a dev's embedded server, on its port
	u, err := url.Parse(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer upstream.Close()
	code, _, errOut := runBin(t, []string{"E2A_NATS_URL=", "E2A_NATS_PORT=" + u.Port(), "E2A_HTTP_ADDR=127.0.0.1:0", "E2A_LOG_LEVEL=error"},
		"agent", "--pool", "py", "--http", upstream.URL+"/")
	want := "E2A_NATS_URL=nats://127.0.0.1:" + u.Port()
	if code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("e2a agent without E2A_NATS_URL beside a server on its port: exit %d, want %q named: %s", code, want, strings.TrimSpace(errOut))
	}
}

// TestREADMECurlExamples: every command of the README's Quick start and
// Protocols sections, run as a newcomer runs them (sh and curl, beside `e2a
// dev`), answers: curl exits 0 (with --fail-with-body, so an HTTP status ≥
// 400 fails it) and what it prints is no error. A placeholder is what the
// commands before it answered, as a reader copies it (<request_id>,
// <sessionId>); grpcurl (a tool of its own, with E2A_GRPC_ADDR set) is left
// to the gRPC tests. Before it no test ran the README's commands: a renamed
// method or field in an example went unnoticed. The Push notifications
// section's command runs as its comment says: <taskId> is the task of a
// SendMessage whose text is `ask:input the weather`, the receiver on port
// 9000 is one of the test's, and the answer to the task (a SendMessage
// naming it) is then posted to that receiver, with the config's token and
// credentials.
func TestREADMECurlExamples(t *testing.T) {
	curl := proctest.Need(t, "curl", "install curl (Debian: apt-get install curl)")
	sh := proctest.Need(t, "sh", "a POSIX shell")
	stmts := readmeShellStatements(t, "Quick start", "Protocols", "Push notifications")
	base := startDev(t, nil).base
	host := strings.TrimPrefix(base, "http://")
	posted := make(chan string, 64)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select { // never blocks the push stage, nor the receiver's Close
		case posted <- r.Header.Get("Authorization") + " " + r.Header.Get("X-A2A-Notification-Token") + " " + string(b):
		default:
		}
	}))
	defer receiver.Close()
	sendMessage := func(text, taskID string) string {
		t.Helper()
		msg := map[string]any{"role": "ROLE_USER", "messageId": "readme-push-" + taskID, "parts": []any{map[string]any{"text": text}}}
		if taskID != "" {
			msg["taskId"] = taskID
		}
		var out struct {
			Result struct {
				Task struct {
					ID string `json:"id"`
				} `json:"task"`
			} `json:"result"`
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{"message": msg}})
		req, _ := http.NewRequest(http.MethodPost, base+"/a2a/v1", bytes.NewReader(body))
		req.Header.Set("A2A-Version", "1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Result.Task.ID == "" {
			t.Fatalf("SendMessage %q: %v, no task", text, err)
		}
		return out.Result.Task.ID
	}
	taskID := sendMessage("ask:input the weather", "")
	prelude := "curl() { '" + curl + "' --fail-with-body -sS --max-time 30 \"$@\"; }\n"
	found := map[string]*regexp.Regexp{
		"<request_id>": regexp.MustCompile(`"request_id":"([^"]+)"`),
		"<sessionId>":  regexp.MustCompile(`"sessionId":"([^"]+)"`),
	}
	values := map[string]string{"<taskId>": taskID}
	ran := 0
	for _, stmt := range stmts {
		switch first := strings.Fields(stmt)[0]; {
		case regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(first):
			prelude += stmt + "\n" // a variable the commands after it use
			continue
		case first != "curl" && first != "printf":
			t.Logf("not run: %s", stmt)
			continue
		}
		cmd := strings.ReplaceAll(stmt, "localhost:8080", host)
		cmd = strings.ReplaceAll(cmd, "http://127.0.0.1:9000", receiver.URL)
		for ph, v := range values {
			cmd = strings.ReplaceAll(cmd, ph, v)
		}
		out, err := exec.Command(sh, "-c", prelude+cmd).CombinedOutput()
		ran++
		if err != nil || len(out) == 0 || strings.Contains(string(out), `"error":`) {
			t.Errorf("README command failed (%v):\n%s\n→ %.600s", err, cmd, out)
		}
		for ph, re := range found {
			if g := re.FindSubmatch(out); g != nil && values[ph] == "" {
				values[ph] = string(g[1])
			}
		}
	}
	if ran < 16 {
		t.Errorf("only %d README commands run: the parse is broken", ran)
	}
	sendMessage("Paris", taskID)
	timeout := time.After(30 * time.Second)
	for {
		select {
		case p := <-posted:
			if !strings.HasPrefix(p, "Bearer <token the receiver expects> per-task-secret ") {
				t.Fatalf("the receiver got %.300s, not the README config's credentials and token", p)
			}
			if strings.Contains(p, "TASK_STATE_COMPLETED") {
				return
			}
		case <-timeout:
			t.Fatalf("the receiver of the README's push config got no completed status of task %s", taskID)
		}
	}
}

// readmeShellStatements returns the shell statements of the ```sh blocks
// in the README's sections with the given titles ("## <title>"), each
// statement whole: its continuation lines (a trailing \ or |, or a quote
// still open) joined to it, comment lines left out.
func readmeShellStatements(t *testing.T, sections ...string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	var section, cur string
	inBlock, quote := false, rune(0)
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, "## "):
			section = strings.TrimPrefix(l, "## ")
		case strings.HasPrefix(l, "```"):
			inBlock = l == "```sh" && slices.Contains(sections, section)
		case !inBlock || (cur == "" && (strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#"))):
		default:
			cur += l + "\n"
			var code string
			code, quote = shellScan(l, quote)
			if code = strings.TrimSpace(code); quote == 0 && !strings.HasSuffix(code, "\\") && !strings.HasSuffix(code, "|") {
				stmts, cur = append(stmts, strings.TrimSpace(cur)), ""
			}
		}
	}
	return stmts
}

// shellScan follows line's quotes from quote (0, ' or "), and returns the
// line without a trailing comment and the quote still open at its end.
func shellScan(line string, quote rune) (string, rune) {
	escaped := false
	for i, c := range line {
		switch {
		case escaped:
			escaped = false
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
		case c == '\\':
			escaped = true
		case quote == '"':
			if c == '"' {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || line[i-1] == ' '):
			return line[:i], 0
		}
	}
	return line, quote
}

// TestREADMEAgentA2ABridgesDev: the README's "Bring your own agent" offers,
// to a reader with no A2A server at hand, `e2a dev` itself as one:
// `e2a agent --pool travel --a2a <e2a dev's URL>` puts its demo agent
// behind the pool, whose requests then answer the demo agent's text.
func TestREADMEAgentA2ABridgesDev(t *testing.T) {
	dev := startDev(t, nil)
	base := dev.base
	_, agentErr := startBin(t, joinEnv(dev.nats), "agent", "--pool", "travel", "--a2a", base)
	if got, _ := waitLine(t, agentErr, regexp.MustCompile(`agent pool running|e2a: .*`)); got[0] != "agent pool running" {
		t.Fatalf("e2a agent --pool travel --a2a <e2a dev>: %s", got[0])
	}
	waitPoolLive(t, base, "travel")
	resp, err := http.Post(base+"/pools/travel/v1/requests?wait=true", "application/json", strings.NewReader(`{"params":{"text":"hi there"}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"state":"succeeded"`) || !strings.Contains(string(b), "You said: hi there") {
		t.Errorf("POST /pools/travel/v1/requests?wait=true: %d %s", resp.StatusCode, b)
	}
}
