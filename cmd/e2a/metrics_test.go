package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// startBin starts the e2a binary with args and extra environment, and
// returns its stdout and stderr lines as they come; it is interrupted and
// waited for at cleanup.
func startBin(t *testing.T, env []string, args ...string) (stdout, stderr <-chan string) {
	t.Helper()
	cmd := exec.Command(e2aBin, args...)
	cmd.Env = append(os.Environ(), env...)
	lines := func(r io.Reader) <-chan string {
		ch := make(chan string, 1024)
		go func() {
			defer close(ch)
			sc := bufio.NewScanner(r)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				ch <- sc.Text()
			}
		}()
		return ch
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errp, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdout, stderr = lines(out), lines(errp)
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return stdout, stderr
}

// devAddr matches the line of `e2a dev`'s banner naming its HTTP base URL
// (the first submatch), the line every test of dev waits for.
var devAddr = regexp.MustCompile(`^\s*HTTP\s+(http://\S+)`)

// devNATS matches the line of `e2a dev`'s banner naming its embedded NATS
// server's URL (the first submatch), alone or in the whole log.
var devNATS = regexp.MustCompile(`(?m)^\s*NATS\s+(nats://\S+)`)

// embeddedEnv is the environment of a process serving its own embedded
// NATS server on a free port, and HTTP on a free loopback port, whatever
// the test's own environment says; more follows (a later value of a
// variable wins).
func embeddedEnv(more ...string) []string {
	return append([]string{"E2A_NATS_URL=", "E2A_NATS_PORT=0", "E2A_HTTP_ADDR=127.0.0.1:0"}, more...)
}

// joinEnv is the environment of a process using the NATS server at url,
// with HTTP on a free loopback port; more follows.
func joinEnv(url string, more ...string) []string {
	return append([]string{"E2A_NATS_URL=" + url, "E2A_HTTP_ADDR=127.0.0.1:0"}, more...)
}

// devProc is an `e2a dev` a test started with startDev.
type devProc struct {
	base   string   // its HTTP base URL
	nats   string   // its embedded NATS server's URL
	banner []string // its stdout up to the NATS line, that line too
	stdout <-chan string
	stderr <-chan string
}

// startDev starts `e2a dev` with args and embeddedEnv(env...), and returns
// it once its banner has named its HTTP and NATS addresses; it is stopped
// at cleanup.
func startDev(t *testing.T, env []string, args ...string) devProc {
	t.Helper()
	p := devProc{}
	p.stdout, p.stderr = startBin(t, embeddedEnv(env...), append([]string{"dev"}, args...)...)
	m, seen := waitLine(t, p.stdout, devAddr)
	p.base = m[1]
	p.banner = append(seen, m[0])
	m, seen = waitLine(t, p.stdout, devNATS)
	p.nats = m[1]
	p.banner = append(append(p.banner, seen...), m[0])
	return p
}

// waitLine returns the first line of ch that matches re (its submatches),
// and the lines read before it.
func waitLine(t *testing.T, ch <-chan string, re *regexp.Regexp) ([]string, []string) {
	t.Helper()
	var seen []string
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("output ended before %s:\n%s", re, strings.Join(seen, "\n"))
			}
			if m := re.FindStringSubmatch(l); m != nil {
				return m, seen
			}
			seen = append(seen, l)
		case <-timeout:
			t.Fatalf("no line matching %s:\n%s", re, strings.Join(seen, "\n"))
		}
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// checkSplit checks that /metrics and /debug/pprof/ are served on metrics
// only, and /healthz and /readyz on main only.
func checkSplit(t *testing.T, main, metrics string) {
	t.Helper()
	// A stage logs its listeners as it starts its work, which registers the
	// e2a_ metrics (`e2a agent` runs the pool in a goroutine): wait for them.
	testkit.Eventually(t, 10*time.Second, "the e2a_ metrics on the metrics listener", func() bool {
		code, body := httpGet(t, metrics+"/metrics")
		return code == 200 && strings.Contains(body, "e2a_")
	})
	if code, _ := httpGet(t, main+"/metrics"); code == 200 {
		t.Errorf("main listener still serves /metrics")
	}
	if _, body := httpGet(t, metrics+"/metrics"); !strings.Contains(body, "\ngo_gc_gogc_percent "+strconv.Itoa(defaultGCPercent)+"\n") {
		t.Errorf("GOGC unset: go_gc_gogc_percent is not %d", defaultGCPercent)
	}
	if code, body := httpGet(t, metrics+"/debug/pprof/heap?debug=1"); code != 200 || !strings.Contains(body, "heap profile") {
		t.Errorf("metrics listener /debug/pprof/heap: %d %.200s", code, body)
	}
	if code, _ := httpGet(t, main+"/debug/pprof/heap"); code == 200 {
		t.Errorf("main listener serves Go's profiles")
	}
	// /readyz waits for what the stage needs, which it may still be
	// making after the log line (the push stage's consumers).
	testkit.Eventually(t, 10*time.Second, "/readyz 200 on the main listener", func() bool {
		code, _ := httpGet(t, main+"/readyz")
		return code == 200
	})
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := httpGet(t, main+p); code != 200 {
			t.Errorf("main listener %s: %d %s", p, code, body)
		}
		if code, _ := httpGet(t, metrics+p); code == 200 {
			t.Errorf("metrics listener serves %s", p)
		}
	}
}

// TestMetricsAddr: with E2A_METRICS_ADDR, `e2a dev` and `e2a agent` serve
// /metrics only there, /healthz and /readyz on E2A_HTTP_ADDR; `e2a dev`
// warns that E2A_MAX_BODY_BYTES exceeds the embedded server's max_payload,
// naming the setting to change; and with GOGC unset both (and dev on a
// NATS server of its own) run the collector at defaultGCPercent
// (go_gc_gogc_percent).
func TestMetricsAddr(t *testing.T) {
	env := embeddedEnv("E2A_METRICS_ADDR=127.0.0.1:0",
		"E2A_LOG_FORMAT=json", "E2A_MAX_BODY_BYTES=16777216", "GOGC=")
	t.Run("dev", func(t *testing.T) {
		stdout, stderr := startBin(t, env, "dev")
		m, _ := waitLine(t, stdout, regexp.MustCompile(`^\s+metrics\s+(http://\S+)/metrics\s+health (http://\S+)/healthz`))
		metrics, main := m[1], m[2]
		if metrics == main {
			t.Fatalf("metrics on the main listener %s", main)
		}
		checkSplit(t, main, metrics)
		w, _ := waitLine(t, stderr, regexp.MustCompile(`"level":"WARN","msg":"(E2A_MAX_BODY_BYTES \(16777216\) exceeds the NATS server's max_payload \(8388608\)[^"]*)"`))
		if !strings.Contains(w[1], "Set E2A_MAX_BODY_BYTES below max_payload") {
			t.Errorf("warning %q", w[1])
		}
	})
	t.Run("agent", func(t *testing.T) {
		_, stderr := startBin(t, env, "agent", "--pool", "demo")
		main, metrics := splitAddrs(t, stderr, "agent pool running")
		checkSplit(t, main, metrics)
	})
	// On a NATS server of its own, dev runs the stages alone, at the same
	// GC target (it kept Go's 100 there).
	t.Run("dev on E2A_NATS_URL", func(t *testing.T) {
		_, nc := natstest.RunServer(t)
		stdout, _ := startBin(t, joinEnv(nc.ConnectedUrl(), "E2A_METRICS_ADDR=127.0.0.1:0", "E2A_LOG_FORMAT=json", "GOGC="), "dev")
		m, _ := waitLine(t, stdout, regexp.MustCompile(`^\s+metrics\s+(http://\S+)/metrics\s+health (http://\S+)/healthz`))
		checkSplit(t, m[2], m[1])
	})
}

// splitAddrs reads from a stage's JSON log the operations listener (the
// "ops" of its running line) and the metrics listener ("metrics served").
func splitAddrs(t *testing.T, stderr <-chan string, running string) (main, metrics string) {
	t.Helper()
	re := regexp.MustCompile(`^\{.*"msg":"(?:metrics served|` + regexp.QuoteMeta(running) + `)".*\}$`)
	for metrics == "" || main == "" {
		m, _ := waitLine(t, stderr, re)
		var rec struct{ Msg, Addr, Ops string }
		if err := json.Unmarshal([]byte(m[0]), &rec); err != nil {
			t.Fatalf("log line %s: %v", m[0], err)
		}
		if rec.Msg == "metrics served" {
			metrics = "http://" + rec.Addr
		} else {
			main = "http://" + rec.Ops
		}
	}
	return main, metrics
}
