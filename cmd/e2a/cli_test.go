package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// runBin runs the built e2a binary with args and extra environment, and
// returns its exit code, stdout and stderr.
func runBin(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2aBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	}
	t.Fatalf("e2a %v: %v", args, err)
	return 0, "", ""
}

// TestFlagHelpNamesTypes: in every command's help a flag's line is its
// name and, for a flag taking a value, one word naming the value
// ("-kill string"). flag.PrintDefaults takes back-quoted text in a usage
// as the value's name: bench's --kill showed as "-kill e2a agent --pool
// demo", as if it took that command.
func TestFlagHelpNamesTypes(t *testing.T) {
	flagLine := regexp.MustCompile(`(?m)^  -(\S+)(.*)$`)
	for _, args := range [][]string{{"dev"}, {"serve"}, {"agent"}, {"acp"}, {"streams", "apply"}, {"vault"}, {"push"},
		{"bench"}, {"replay"}, {"tail"}, {"publish"}, {"archive"}} {
		code, out, _ := runBin(t, []string{"E2A_NATS_URL="}, append(args, "-h")...)
		if code != 0 {
			t.Fatalf("e2a %v -h: exit %d", args, code)
		}
		for _, m := range flagLine.FindAllStringSubmatch(out, -1) {
			if v := strings.TrimSpace(m[2]); strings.Contains(v, " ") {
				t.Errorf("e2a %s -h shows the flag as \"-%s %s\": a back-quoted usage names its value", strings.Join(args, " "), m[1], v)
			}
		}
	}
}

// TestCLIHelp: every subcommand's help is its own (usage, flags, the
// environment it reads) on stdout with exit 0; a wrong flag or argument
// prints the error and that help on stderr with exit 2, never the global
// list; `streams apply -h` does not apply anything.
func TestCLIHelp(t *testing.T) {
	// No NATS anywhere: a command that tried to connect would fail.
	env := []string{"E2A_NATS_URL="}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"dev", "-h"}, []string{"Usage: e2a dev", "E2A_HTTP_ADDR", "E2A_NATS_PORT"}},
		{[]string{"serve", "--help"}, []string{"Usage: e2a serve", "E2A_NATS_URL", "required"}},
		{[]string{"agent", "-h"}, []string{"Usage: e2a agent", "-pool", "-concurrency", "E2A_NATS_URL"}},
		{[]string{"acp", "-help"}, []string{"Usage: e2a acp", "-pool", "E2A_DEFAULT_POOL"}},
		{[]string{"streams", "apply", "-h"}, []string{"Usage: e2a streams apply", "E2A_REPLICAS", "E2A_NATS_URL"}},
		{[]string{"streams", "-h"}, []string{"Usage: e2a streams apply"}},
		// A help flag after the action: help, not the action run with it.
		{[]string{"vault", "seal", "-h"}, []string{"Usage: e2a vault"}},
		{[]string{"vault", "rotate", "--help"}, []string{"Usage: e2a vault"}},
		{[]string{"push", "dead", "-h"}, []string{"Usage: e2a push"}},
		{[]string{"bench", "-h"}, []string{"Usage: e2a bench", "-protocol", "-target"}},
		{[]string{"replay", "-h"}, []string{"Usage: e2a replay", "-task", "E2A_NATS_URL", "3 a request was not found"}},
		{[]string{"tail", "-h"}, []string{"Usage: e2a tail", "-pool", "E2A_NATS_URL"}},
		{[]string{"publish", "-h"}, []string{"Usage: e2a publish", "-follow", "E2A_NATS_URL"}},
		{[]string{"archive", "-h"}, []string{"Usage: e2a archive", "E2A_ARCHIVE_BATCH_BYTES", "E2A_ARCHIVE_FLUSH_INTERVAL", "E2A_NATS_URL"}},
		{[]string{"dev", "-h"}, []string{"E2A_ARCHIVE ", "in this process (default false)"}},
		{[]string{"help"}, []string{"e2a dev", "e2a archive", "e2a COMMAND -h"}},
		// `e2a help COMMAND [ACTION]` is the command's help, as with -h.
		{[]string{"help", "dev"}, []string{"Usage: e2a dev", "E2A_HTTP_ADDR"}},
		{[]string{"help", "push", "dead"}, []string{"Usage: e2a push"}},
		{[]string{"help", "streams", "apply"}, []string{"Usage: e2a streams apply"}},
	} {
		code, out, errOut := runBin(t, env, c.args...)
		if code != 0 || errOut != "" {
			t.Errorf("e2a %v: exit %d, stderr %q", c.args, code, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("e2a %v: help lacks %q:\n%s", c.args, w, out)
			}
		}
		if (c.args[0] != "help" || len(c.args) > 1) && strings.Contains(out, "this text") {
			t.Errorf("e2a %v: printed the global usage:\n%s", c.args, out)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"dev", "--nope"}, "Usage: e2a dev"},
		{[]string{"serve", "extra"}, "Usage: e2a serve"},
		{[]string{"agent", "--concurrency", "x"}, "Usage: e2a agent"},
		{[]string{"streams"}, "missing action"},
		{[]string{"streams", "nuke"}, `unknown action "nuke"`},
		{[]string{"bench", "--requests"}, "Usage: e2a bench"},
		{[]string{"tail", "extra"}, "Usage: e2a tail"},
		{[]string{"archive", "extra"}, "Usage: e2a archive"},
		{[]string{"replay", "--since", "yesterday"}, "Usage: e2a replay"},
	} {
		code, out, errOut := runBin(t, env, c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "this text") {
			t.Errorf("e2a %v: exit %d, stdout %q, stderr:\n%s", c.args, code, out, errOut)
		}
	}
	// Flags no mode takes together are bad arguments (exit 2).
	if code, _, errOut := runBin(t, env, "bench", "--warm-mib", "8", "--duration", "1s", "--rate", "10"); code != 2 || !strings.Contains(errOut, "--warm-mib applies to") {
		t.Errorf("e2a bench --warm-mib --duration: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runBin(t, env, "bench", "--nats", "nats://127.0.0.1:1"); code != 2 || !strings.Contains(errOut, "--nats goes with --target") {
		t.Errorf("e2a bench --nats alone: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runBin(t, env, "bench", "--trace", filepath.Join(t.TempDir(), "t.out"), "--peer", "a2a-go"); code != 2 || !strings.Contains(errOut, "--trace traces the half-load phase") {
		t.Errorf("e2a bench --trace --peer: exit %d, %s", code, errOut)
	}
	for _, args := range [][]string{{"bench", "--workers", "2"}, {"bench", "--ack-wait", "2s"}} {
		if code, _, errOut := runBin(t, env, args...); code != 2 || !strings.Contains(errOut, "apply to --recovery") {
			t.Errorf("e2a %v: exit %d, %s", args, code, errOut)
		}
	}
	if code, _, errOut := runBin(t, env, "bench", "--recovery", "--target", "http://127.0.0.1:1"); code != 2 || !strings.Contains(errOut, "--recovery runs a pipeline of its own") {
		t.Errorf("e2a bench --recovery --target: exit %d, %s", code, errOut)
	}
	for _, args := range [][]string{{"nope"}, {"help", "nope"}, {"help", "--pool"}} {
		if code, _, errOut := runBin(t, env, args...); code != 2 || !strings.Contains(errOut, "e2a dev") {
			t.Errorf("e2a %v: exit %d, %s", args, code, errOut)
		}
	}
}

// TestDevPortTaken: `e2a dev` with its HTTP or NATS port taken says so at
// once, naming the variable that moves it.
func TestDevPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	for _, c := range []struct {
		env  []string
		want []string
	}{
		{[]string{"E2A_NATS_URL=", "E2A_HTTP_ADDR=127.0.0.1:" + port, "E2A_NATS_PORT=0"}, []string{"already in use", "E2A_HTTP_ADDR", "127.0.0.1:0", "e.g. E2A_HTTP_ADDR=127.0.0.1:"}}, // a free one: TestHTTPPortTakenSuggestsAFreeOne
		{[]string{"E2A_NATS_URL=", "E2A_HTTP_ADDR=127.0.0.1:0", "E2A_NATS_PORT=" + port}, []string{"NATS port " + port + " is already in use", "E2A_NATS_PORT"}},
	} {
		start := time.Now()
		code, _, errOut := runBin(t, c.env, "dev")
		if code != 1 || time.Since(start) > 10*time.Second {
			t.Errorf("%v: exit %d after %v: %s", c.env, code, time.Since(start), errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr lacks %q: %s", c.env, w, errOut)
			}
		}
		if strings.Contains(errOut, "provisioned") || strings.Contains(errOut, "console") {
			t.Errorf("%v: started something before checking the ports: %s", c.env, errOut)
		}
	}
}

// TestUnknownCommandNamed: an unknown command (`e2a deve`, `e2a help
// deve`) is named on stderr's first line before the usage. The usage alone
// was printed (exit 2), nothing saying what was wrong with the line typed.
func TestUnknownCommandNamed(t *testing.T) {
	for _, args := range [][]string{{"deve"}, {"help", "deve"}} {
		code, _, errOut := runBin(t, embeddedEnv(), args...)
		first, rest, _ := strings.Cut(errOut, "\n")
		if code != 2 || first != `e2a: unknown command "deve"` || !strings.Contains(rest, "e2a dev") {
			t.Errorf("e2a %v: exit %d, stderr:\n%s", args, code, errOut)
		}
	}
	if code, _, errOut := runBin(t, embeddedEnv()); code != 2 || strings.Contains(errOut, "unknown command") {
		t.Errorf("e2a alone: exit %d, stderr:\n%s", code, errOut)
	}
}

// TestPortFlagNamesTheVariable: a flag for an address or a port (`e2a dev
// --port 9000`, what a newcomer tries first) is refused naming the
// variables that set them, on the error's own line; the help printed after
// it lists E2A_HTTP_ADDR 35 lines down. A flag of no such kind keeps the
// flag package's error alone.
func TestPortFlagNamesTheVariable(t *testing.T) {
	for _, args := range [][]string{{"dev", "--port", "9000"}, {"dev", "-addr=:9000"}, {"agent", "--listen", "127.0.0.1:9000"}, {"serve", "--nats-port", "4223"}} {
		code, _, errOut := runBin(t, embeddedEnv(), args...)
		first, _, _ := strings.Cut(errOut, "\n")
		if code != 2 || !strings.Contains(first, "flag provided but not defined") || !strings.Contains(first, "E2A_HTTP_ADDR=") || !strings.Contains(first, "E2A_NATS_PORT") {
			t.Errorf("e2a %v: exit %d, first line %q", args, code, first)
		}
	}
	code, _, errOut := runBin(t, embeddedEnv(), "dev", "--verbose")
	if first, _, _ := strings.Cut(errOut, "\n"); code != 2 || strings.Contains(first, "E2A_HTTP_ADDR") {
		t.Errorf("e2a dev --verbose: exit %d, first line %q", code, first)
	}
}

// TestHTTPPortTakenSuggestsAFreeOne: the address a taken E2A_HTTP_ADDR
// suggests is free. It was the port after the taken one, whatever held
// that: with two `e2a dev` running (8080, 8081), a third was told
// "E2A_HTTP_ADDR=127.0.0.1:8081", taken as well.
func TestHTTPPortTakenSuggestsAFreeOne(t *testing.T) {
	taken, next := adjacentListeners(t)
	_, err := listenHTTP(taken.Addr().String())
	if err == nil {
		t.Fatal("listenHTTP on a taken address: no error")
	}
	m := regexp.MustCompile(`E2A_HTTP_ADDR=(127\.0\.0\.1:\d+)`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("the error suggests no address: %v", err)
	}
	if m[1] == next.Addr().String() {
		t.Fatalf("it suggests %s, taken as well: %v", m[1], err)
	}
	ln, lerr := net.Listen("tcp", m[1])
	if lerr != nil {
		t.Fatalf("the suggested %s is not free: %v (%v)", m[1], lerr, err)
	}
	ln.Close()
}

// adjacentListeners holds two loopback ports in a row, p and p+1.
func adjacentListeners(t *testing.T) (net.Listener, net.Listener) {
	t.Helper()
	for range 50 {
		a, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(a.Addr().(*net.TCPAddr).Port+1))
		if err != nil {
			a.Close()
			continue
		}
		t.Cleanup(func() { a.Close(); b.Close() })
		return a, b
	}
	t.Fatal("no two free loopback ports in a row")
	return nil, nil
}

// TestNATSPortTakenNamesWhatHoldsIt: the error for a taken E2A_NATS_PORT
// suggests E2A_NATS_URL only when a NATS server holds the port. It said
// "to use that server, set E2A_NATS_URL=nats://…" whatever held it, and
// an operator who followed it with another program on the port got a
// connection that failed (that program is no NATS server).
func TestNATSPortTakenNamesWhatHoldsIt(t *testing.T) {
	port := func(addr net.Addr) int { return addr.(*net.TCPAddr).Port }
	// A listener that never accepts: the connection waits in its backlog,
	// nothing is written.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// A listener that greets as another protocol does (SSH).
	greeter, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer greeter.Close()
	go func() {
		for {
			c, err := greeter.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n")
			_ = c.Close()
		}
	}()
	for name, p := range map[string]int{"silent listener": port(silent.Addr()), "SSH greeting": port(greeter.Addr())} {
		err := checkNATSPort(Config{NATSPort: p})
		if err == nil || !strings.Contains(err.Error(), "does not answer as a NATS server") ||
			!strings.Contains(err.Error(), "E2A_NATS_PORT") || strings.Contains(err.Error(), "E2A_NATS_URL") {
			t.Errorf("%s on the NATS port: %v, want it said not to be a NATS server, naming E2A_NATS_PORT and not E2A_NATS_URL", name, err)
		}
	}
	srv, _ := natstest.RunServer(t)
	u, err := url.Parse(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(u.Port())
	err = checkNATSPort(Config{NATSPort: p})
	if err == nil || !strings.Contains(err.Error(), "by a NATS server") ||
		!strings.Contains(err.Error(), "E2A_NATS_URL=nats://127.0.0.1:"+u.Port()) || !strings.Contains(err.Error(), "E2A_NATS_PORT") {
		t.Errorf("a NATS server on the NATS port: %v, want E2A_NATS_URL=nats://127.0.0.1:%s and E2A_NATS_PORT named", err, u.Port())
	}
}

// TestDevPools: `e2a dev` refuses a request for a pool that does not exist
// (a typo) at once, and /readyz says which pools have a live worker.
func TestDevPools(t *testing.T) {
	dev := startDev(t, []string{"E2A_LOG_FORMAT=json"})
	base, banner, stderr := dev.base, dev.banner, dev.stderr
	// The banner is plain text on stdout; the logs on stderr stay
	// structured, one JSON object a line (the provisioning report too).
	if len(banner) == 0 || banner[0] != "E2A Pipeline (dev) is running." {
		t.Errorf("banner starts with %q", banner)
	}
	_, before := waitLine(t, stderr, regexp.MustCompile(`"msg":"provisioned","kind":"kv","name":"E2A_TASKS"`))
	for _, l := range before {
		var v map[string]any
		if json.Unmarshal([]byte(l), &v) != nil || strings.Contains(fmt.Sprint(v["msg"]), "\n") {
			t.Errorf("log line is not one structured record: %q", l)
		}
	}
	var ready struct {
		Status  string `json:"status"`
		Details struct {
			Pools map[string]string `json:"pools"`
		} `json:"details"`
	}
	testkit.Eventually(t, 30*time.Second, "both pools live in /readyz", func() bool {
		_, body := httpGet(t, base+"/readyz")
		return json.Unmarshal([]byte(body), &ready) == nil && ready.Status == "ready" &&
			ready.Details.Pools["demo"] == "live" && ready.Details.Pools["workflow"] == "live"
	})
	resp, err := http.Post(base+"/v1/requests?agent=nopool", "application/json", strings.NewReader(`{"params":{"text":"hi"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(b), "unknown_agent") || !strings.Contains(string(b), "nopool") {
		t.Errorf("typo pool: %d %s", resp.StatusCode, b)
	}
	// Auth off: every reader reads, but a credential presented is checked
	// on a read as on a POST (ingress/AUTH.md): a wrong one is 401.
	resp, b = testkit.Do(t, http.MethodPost, base+"/v1/requests?wait=true", `{"request_id":"dev-read-1","params":{"text":"hi","frames":1}}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	for _, c := range []struct {
		hdr  []string
		want int
	}{{nil, http.StatusOK}, {[]string{"Authorization", "Bearer wrong"}, http.StatusUnauthorized}, {[]string{"X-Api-Key", "wrong"}, http.StatusUnauthorized}} {
		for _, path := range []string{"/v1/requests/dev-read-1", "/v1/requests/dev-read-1/stream"} {
			if resp, b := testkit.Do(t, http.MethodGet, base+path, "", c.hdr...); resp.StatusCode != c.want {
				t.Errorf("GET %s with %v: %d %.200s, want %d", path, c.hdr, resp.StatusCode, b, c.want)
			}
		}
	}
	if resp, b := testkit.Do(t, http.MethodPost, base+"/v1/requests", `{"params":{"text":"hi"}}`, "Authorization", "Bearer wrong"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST with a wrong bearer: %d %.200s, want 401", resp.StatusCode, b)
	}
}

// TestVault: `e2a vault` makes a key, seals a value that the workflow
// vault opens with that key (and only for that credential id), and asks
// for help like every subcommand.
func TestVault(t *testing.T) {
	code, key, errOut := runBin(t, nil, "vault", "key")
	key = strings.TrimSpace(key)
	if raw, err := base64.StdEncoding.DecodeString(key); code != 0 || err != nil || len(raw) != 32 {
		t.Fatalf("vault key: %d %q %s", code, key, errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2aBin, "vault", "seal", "github")
	cmd.Env = append(os.Environ(), "E2A_WORKFLOW_VAULT_KEYS="+key)
	cmd.Stdin = strings.NewReader("ghp_secret_value_0123\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("vault seal: %v", err)
	}
	sealed := strings.TrimSpace(string(out))
	if strings.Contains(sealed, "ghp_secret_value_0123") {
		t.Fatalf("sealed value shows the secret: %s", sealed)
	}
	ring, err := workflow.ParseKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := ring.Open("github", sealed); err != nil || v != "ghp_secret_value_0123" {
		t.Fatalf("open: %q %v", v, err)
	}
	if _, err := ring.Open("gitlab", sealed); err == nil {
		t.Fatal("a value sealed for one credential id opened for another")
	}
	if code, out, _ := runBin(t, nil, "vault", "-h"); code != 0 || !strings.Contains(out, "E2A_WORKFLOW_VAULT_KEYS") {
		t.Errorf("vault -h: %d %s", code, out)
	}
	if code, _, errOut := runBin(t, nil, "vault", "nuke"); code != 2 || !strings.Contains(errOut, "Usage: e2a vault") {
		t.Errorf("vault nuke: %d %s", code, errOut)
	}
	// An empty credential id sealed a value the vault never takes (a
	// credential without id), exit 0.
	if code, out, errOut := runBin(t, []string{"E2A_WORKFLOW_VAULT_KEYS=" + key}, "vault", "seal", ""); code != 2 || out != "" {
		t.Errorf("vault seal '': exit %d, stdout %q, stderr %s; want 2 and nothing sealed", code, out, errOut)
	}
}

// TestReplayNotFoundExit: `e2a replay` of an id that does not exist exits
// 3 (not found), not 0; with E2A_NATS_URL unset it says what to set.
func TestReplayNotFoundExit(t *testing.T) {
	srv, _ := natstest.RunServer(t)
	code, out, errOut := runBin(t, []string{"E2A_NATS_URL=" + srv.ClientURL()}, "replay", "nope-xyz")
	if code != exitNotFound || !strings.Contains(out, `"state":"not_found"`) || !strings.Contains(errOut, "not found") {
		t.Errorf("replay nope-xyz: exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	code, _, errOut = runBin(t, []string{"E2A_NATS_URL="}, "replay", "nope-xyz")
	if code != exitFailure || !strings.Contains(errOut, "E2A_NATS_URL") || !strings.Contains(errOut, "e2a dev") {
		t.Errorf("replay without a URL: exit %d, %s", code, errOut)
	}
}

// e2a's long-running processes set GOGC=200 unless GOGC is set.
func TestGCDefault(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	t.Setenv("GOGC", "150")
	if got := gcDefault(); got != 0 || debug.SetGCPercent(100) != 100 {
		t.Fatalf("GOGC set: gcDefault %d changed the target", got)
	}
	t.Setenv("GOGC", "")
	if got := gcDefault(); got != defaultGCPercent || debug.SetGCPercent(100) != defaultGCPercent {
		t.Fatalf("GOGC unset: gcDefault %d", got)
	}
}

// TestTasksTTLConfig: E2A_TASKS_TTL reaches E2A_TASKS's TTL (the memory
// lever of an A2A deployment's task records, docs/capacity.md), defaults to
// 72h, may be 0 (forever), and is refused below E2A_RESPONSES_MAX_AGE or
// E2A_REQUESTS_MAX_AGE (a one-turn A2A task's request is its record).
func TestTasksTTLConfig(t *testing.T) {
	for _, c := range []struct {
		ttl, responses, requests string
		want                     time.Duration
		bad                      bool
	}{
		{"", "", "", 72 * time.Hour, false},
		{"2m", "2m", "", 2 * time.Minute, false},
		{"0", "", "", 0, false},
		{"1h", "24h", "", 0, true},
		{"2h", "1h", "3h", 0, true},
		{"3h", "1h", "3h", 3 * time.Hour, false},
	} {
		if c.requests == "" {
			c.requests = c.responses
		}
		dedupe := ""
		if c.responses != "" {
			dedupe = "1m"
		}
		for k, v := range map[string]string{"E2A_TASKS_TTL": c.ttl, "E2A_RESPONSES_MAX_AGE": c.responses,
			"E2A_REQUESTS_MAX_AGE": c.requests, "E2A_DEDUPE_WINDOW": dedupe} {
			t.Setenv(k, v) // restored after the test
			if v == "" {
				_ = os.Unsetenv(k) // the default
			}
		}
		cfg, err := LoadConfig()
		if c.bad {
			if err == nil || !strings.Contains(err.Error(), "E2A_TASKS_TTL") {
				t.Errorf("E2A_TASKS_TTL=%s with responses kept %s, requests %s: err %v", c.ttl, c.responses, c.requests, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("E2A_TASKS_TTL=%q: %v", c.ttl, err)
		}
		if got := cfg.StreamsConfig().TasksTTL; got != c.want {
			t.Errorf("E2A_TASKS_TTL=%q: TasksTTL %v, want %v", c.ttl, got, c.want)
		}
		if err := cfg.StreamsConfig().Validate(); err != nil {
			t.Errorf("E2A_TASKS_TTL=%q: %v", c.ttl, err)
		}
	}
}
