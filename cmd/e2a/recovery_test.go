package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/internal/bench"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// Load of the recovery tests: every request streams 4 + recoveryText
// frames 100 ms apart (~4.4 s), all in flight at once (the dev server's
// workers handle agent.DefaultConcurrency requests at a time).
const (
	recoveryRequests = agent.DefaultConcurrency
	recoveryText     = 40
)

// e2aProc is an e2a process run by a recovery test.
type e2aProc struct {
	cmd    *exec.Cmd
	url    string
	exited chan struct{}
	log    *testkit.Buffer
}

// startE2A runs e2a with args and env and waits until addr finds its HTTP
// address in a line of its output (standard output and error). It is
// killed at the end of the test; its log is shown when the test failed.
func startE2A(t *testing.T, addr *regexp.Regexp, env []string, args ...string) *e2aProc {
	t.Helper()
	p := &e2aProc{cmd: exec.Command(e2aBin, args...), exited: make(chan struct{}), log: &testkit.Buffer{}}
	p.cmd.Env = append(os.Environ(), append([]string{"E2A_HTTP_ADDR=127.0.0.1:0", "E2A_NATS_PORT=0", "E2A_PUSH=off",
		"E2A_LOG_LEVEL=warn"}, env...)...)
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			_, _ = p.log.Write(append(sc.Bytes(), '\n'))
			if m := addr.FindStringSubmatch(sc.Text()); m != nil && len(found) == 0 {
				found <- m[1]
			}
		}
	}()
	go func() { _ = p.cmd.Wait(); _ = pw.Close(); close(p.exited) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("e2a %v:\n%s", args, p.log)
		}
	})
	select {
	case a := <-found:
		p.url = a
		if !strings.HasPrefix(a, "http://") {
			p.url = "http://" + a
		}
	case <-p.exited:
		t.Fatalf("e2a %v exited:\n%s", args, p.log)
	case <-time.After(30 * time.Second):
		t.Fatalf("e2a %v gave no address in 30 s:\n%s", args, p.log)
	}
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *e2aProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// TestDevKilledMidStream: `e2a dev` is SIGKILLed while 32 requests stream
// (44 frames, 100 ms apart) and restarted on the same store; each client
// resumes on the new process with Last-Event-ID (e2a bench --recovery
// --kill dev). Per request, the time from the kill to the first frame
// written by the restarted agent (another worker id) is at most
// RecoveryTarget at p99, and every client received every frame once, in
// order, with the demo's text.
func TestDevKilledMidStream(t *testing.T) {
	runRecovery(t, bench.RecoveryConfig{Kill: bench.KillDev, Bin: e2aBin, Requests: recoveryRequests, Frames: 4 + recoveryText, Delay: 100 * time.Millisecond})
}

var serveAddr = regexp.MustCompile(`"msg":"serving".*"addr":"([^"]+)"`)

// TestServeReplicaKilled: two `e2a serve` processes on one NATS server
// (behind a load balancer), with auth, and an agent process beside them;
// 32 clients stream from the first (44 frames, 100 ms apart), which is
// SIGKILLed mid-stream; each client reconnects at once to the second with
// Last-Event-ID and its key (e2a bench --recovery --kill serve). Per
// request, the time from the kill to the first frame from the second
// replica is at most ServeRecoveryTarget at p99, and every client received
// every frame once, in order, with the demo's text.
func TestServeReplicaKilled(t *testing.T) {
	const key = "recovery-key-5b1f0c"
	runRecovery(t, bench.RecoveryConfig{Kill: bench.KillServe, Bin: e2aBin, Workers: 1, Requests: recoveryRequests,
		Frames: 4 + recoveryText, Delay: 100 * time.Millisecond, Env: []string{"E2A_API_KEYS=tester:" + key},
		Header: http.Header{"X-Api-Key": {key}}})
}

// runRecovery runs the recovery scenario and checks its report: every
// request in flight at the kill, each resumed within the kill's target at
// p99, every stream whole and exactly once.
func runRecovery(t *testing.T, cfg bench.RecoveryConfig) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := bench.RunRecovery(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.Text())
	if !rep.OK() || rep.Held != cfg.Requests {
		t.Errorf("held %d of %d requests; report not OK:\n%s", rep.Held, cfg.Requests, rep.Text())
	}
}
