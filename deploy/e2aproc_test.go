package deploy

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestMain removes the e2a binary built for the test binary (e2aBinary).
func TestMain(m *testing.M) {
	code := m.Run()
	if e2aBinDir != "" {
		_ = os.RemoveAll(e2aBinDir)
	}
	os.Exit(code)
}

var (
	e2aBinOnce sync.Once
	e2aBinDir  string
	e2aBinPath string
	e2aBinErr  string
)

// e2aBinary builds cmd/e2a once per test binary, into a temporary
// directory removed by TestMain, and returns its path: the deployment test
// runs the binary an operator runs, not the packages in process.
func e2aBinary(t testing.TB) string {
	t.Helper()
	e2aBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "e2a-deploy-test-")
		if err != nil {
			e2aBinErr = err.Error()
			return
		}
		e2aBinDir = dir
		bin := filepath.Join(dir, "e2a")
		start := time.Now()
		if out, err := exec.Command(goTool(), "build", "-o", bin, "github.com/e2a-pipeline/pipeline/cmd/e2a").CombinedOutput(); err != nil {
			e2aBinErr = "go build ./cmd/e2a: " + err.Error() + "\n" + string(out)
			return
		}
		t.Logf("built e2a in %v", time.Since(start).Round(time.Millisecond))
		e2aBinPath = bin
	})
	if e2aBinErr != "" {
		t.Fatal(e2aBinErr)
	}
	return e2aBinPath
}

// e2aProc is one e2a process (a stage or a CLI command) run as an
// operator runs it: its own OS process, configured by the environment.
type e2aProc struct {
	name   string
	user   string
	addr   string // E2A_HTTP_ADDR of a stage, "" for a command
	dir    string
	cmd    *exec.Cmd
	done   chan struct{}
	err    error // from Wait, once done is closed
	killed bool  // by the test
}

func (p *e2aProc) stdoutPath() string { return filepath.Join(p.dir, "stdout") }
func (p *e2aProc) stderrPath() string { return filepath.Join(p.dir, "stderr") }

func (p *e2aProc) exited() bool { return closed(p.done) }

// stderrTail is the end of the process's log.
func (p *e2aProc) stderrTail() string { return fileTail(6000, p.stderrPath()) }

// url is the process's HTTP base URL.
func (p *e2aProc) url() string { return "http://" + p.addr }

// deployment runs e2a processes against a natsCluster with the shipped
// configuration: the e2a-config ConfigMap of deploy/k8s as environment
// (loopback addresses instead of the cluster's service names), each stage
// as its own NATS user over TLS.
type deployment struct {
	t     *testing.T
	c     *natsCluster
	bin   string
	env   map[string]string
	procs []*e2aProc
	mu    sync.Mutex
}

// configMapEnv returns the data of deploy/k8s/config.yaml's ConfigMap
// (strictly decoded), the environment every e2a pod gets.
func configMapEnv(t testing.TB) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("k8s", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := strictDecode(data, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Name != "e2a-config" || len(cm.Data) == 0 {
		t.Fatalf("k8s/config.yaml: %s with %d keys", cm.Name, len(cm.Data))
	}
	return cm.Data
}

func newDeployment(t *testing.T, c *natsCluster) *deployment {
	env := configMapEnv(t)
	env["E2A_NATS_URL"] = c.URL()
	env["E2A_NATS_TLS_CA"] = c.tls.CA
	env["E2A_NATS_RECONNECT_WAIT"] = "100ms"
	env["E2A_LOG_FORMAT"] = "json"
	d := &deployment{t: t, c: c, bin: e2aBinary(t), env: env}
	t.Cleanup(d.stop)
	return d
}

// start starts `e2a args...` as NATS user (password from the cluster),
// with extra variables; a stage (serve, agent, archive) gets a loopback
// HTTP address.
func (d *deployment) start(name, user string, extra map[string]string, args ...string) *e2aProc {
	t := d.t
	t.Helper()
	p := &e2aProc{name: name, user: user, dir: t.TempDir(), done: make(chan struct{})}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + p.dir, "TMPDIR=" + p.dir}
	vars := map[string]string{}
	for k, v := range d.env {
		vars[k] = v
	}
	if args[0] == "serve" || args[0] == "agent" || args[0] == "archive" {
		p.addr = fmt.Sprintf("127.0.0.1:%d", natstest.FreePorts(t, 1)[0])
		vars["E2A_HTTP_ADDR"] = p.addr
	}
	vars["E2A_NATS_USER"] = user
	vars["E2A_NATS_PASSWORD"] = d.c.passwords[user]
	vars["E2A_NATS_NAME"] = name
	for k, v := range extra {
		vars[k] = v
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	p.cmd = exec.Command(d.bin, args...)
	p.cmd.Env = env
	p.cmd.Dir = p.dir
	out, err := os.Create(p.stdoutPath())
	if err != nil {
		t.Fatal(err)
	}
	errf, err := os.Create(p.stderrPath())
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = out, errf
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		_ = out.Close()
		_ = errf.Close()
		close(p.done)
	}()
	d.mu.Lock()
	d.procs = append(d.procs, p)
	d.mu.Unlock()
	return p
}

// run runs a command to its end (bounded by within) and returns its
// stdout; it fails the test unless the exit status is 0.
func (d *deployment) run(name, user string, within time.Duration, args ...string) string {
	d.t.Helper()
	p := d.start(name, user, nil, args...)
	select {
	case <-p.done:
	case <-time.After(within):
		d.kill(p)
		d.t.Fatalf("%s did not end within %v:\n%s", name, within, p.stderrTail())
	}
	out, _ := os.ReadFile(p.stdoutPath())
	if p.err != nil {
		d.t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", name, p.err, out, p.stderrTail())
	}
	return string(out)
}

// waitReady polls the stage's /readyz until it answers 200 "ready" (NATS
// connected, streams present; not "degraded": JetStream answering too),
// failing when the process exits first.
func (d *deployment) waitReady(p *e2aProc, within time.Duration) {
	d.t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	var err error
	ready := testkit.Until(within, func() bool {
		var ok bool
		if ok, err = readyOK(client, p.url()+"/readyz"); ok {
			return true
		}
		if p.exited() {
			d.t.Fatalf("%s (user %s) exited at start-up: %v\n%s", p.name, p.user, p.err, p.stderrTail())
		}
		return false
	})
	if !ready {
		d.t.Fatalf("%s not ready after %v (last: %v)\n%s", p.name, within, err, p.stderrTail())
	}
}

// kill crashes a process (SIGKILL).
func (d *deployment) kill(p *e2aProc) {
	p.killed = true
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// checkRunning fails the test for every stage that exited without the
// test killing it.
func (d *deployment) checkRunning() {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.procs {
		if p.addr != "" && !p.killed && p.exited() {
			d.t.Errorf("%s exited: %v\n%s", p.name, p.err, p.stderrTail())
		}
	}
}

// violation matches what a NATS server logs (Publish/Subscription
// Violation) and what a client is told (Permissions Violation).
var violation = regexp.MustCompile(`(?i)(permissions|publish|subscription) violation`)

// checkLogs fails the test on any permissions violation in the log of any
// e2a process or NATS server.
func (d *deployment) checkLogs() {
	d.t.Helper()
	var files []string
	d.mu.Lock()
	for _, p := range d.procs {
		files = append(files, p.stderrPath(), p.stdoutPath())
	}
	d.mu.Unlock()
	for _, nd := range d.c.nodes {
		files = append(files, nd.logPath, filepath.Join(nd.dir, "stderr.log"))
	}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		n := 0
		for sc.Scan() {
			if violation.MatchString(sc.Text()) {
				if n++; n <= 5 {
					d.t.Errorf("%s: %s", f, sc.Text())
				}
			}
		}
		fh.Close()
	}
}

func (d *deployment) stop() {
	d.mu.Lock()
	procs := append([]*e2aProc(nil), d.procs...)
	d.mu.Unlock()
	for _, p := range procs {
		if !p.exited() {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	}
	if d.t.Failed() {
		for _, p := range procs {
			d.t.Logf("---- %s (user %s, exit %v) log (tail)\n%s", p.name, p.user, p.err, p.stderrTail())
		}
	}
}

// scrape reads a stage's /metrics.
func scrape(t testing.TB, p *e2aProc) string {
	t.Helper()
	resp, err := http.Get(p.url() + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", p.name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %v", p.name, resp.StatusCode, err)
	}
	return string(b)
}

// exitStatus is the exit code of an ended process (-1 when killed by a
// signal).
func exitStatus(p *e2aProc) string {
	if p.cmd.ProcessState == nil {
		return "running"
	}
	return strconv.Itoa(p.cmd.ProcessState.ExitCode())
}

// hasLine reports whether the file holds a line containing every one of
// subs.
func hasLine(path string, subs ...string) bool {
	b, _ := os.ReadFile(path)
	for _, l := range strings.Split(string(b), "\n") {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			return true
		}
	}
	return false
}
