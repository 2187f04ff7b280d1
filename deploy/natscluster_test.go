package deploy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// Users of deploy/nats/accounts.conf and the environment variable holding
// each one's password.
var natsUsers = map[string]string{
	"admin":          "E2A_NATS_ADMIN_PASSWORD",
	"ingress":        "E2A_NATS_INGRESS_PASSWORD",
	"egress":         "E2A_NATS_EGRESS_PASSWORD",
	"serve":          "E2A_NATS_SERVE_PASSWORD",
	"agent-demo":     "E2A_NATS_AGENT_DEMO_PASSWORD",
	"agent-workflow": "E2A_NATS_AGENT_WORKFLOW_PASSWORD",
	"agent-bridge":   "E2A_NATS_AGENT_BRIDGE_PASSWORD",
	"push":           "E2A_NATS_PUSH_PASSWORD",
	"archive":        "E2A_NATS_ARCHIVE_PASSWORD",
	"audit":          "E2A_NATS_AUDIT_PASSWORD",
	"sys":            "E2A_NATS_SYS_PASSWORD",
}

// natsConfigPath is the node configuration every process runs.
func natsConfigPath(t testing.TB) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("nats", "nats-server.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// natsNode is one nats-server process.
type natsNode struct {
	name                        string
	port, httpPort, clusterPort int
	dir, logPath                string
	cmd                         *exec.Cmd
	done                        chan struct{}
}

// natsCluster is a cluster of real nats-server processes on loopback ports
// running deploy/nats/nats-server.conf.
type natsCluster struct {
	t         testing.TB
	passwords map[string]string
	nodes     []*natsNode
	// tls holds the CA and the certificate the nodes serve (clients and
	// routes), generated for the test.
	tls *testTLS
}

func randomSecret(t testing.TB) string {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// startNATSCluster starts n nats-server processes with the shipped
// configuration: the loopback ports and routes come from the command line
// (they override the file), the server name, the store directory, the
// users' passwords and the TLS files (generated here) from the
// environment, as in production.
func startNATSCluster(t testing.TB, n int) *natsCluster {
	t.Helper()
	bin := natsServerBinary(t)
	conf := natsConfigPath(t)
	c := &natsCluster{t: t, passwords: map[string]string{}, tls: newTestTLS(t)}
	env := append(os.Environ(), c.tls.natsTLSEnv()...)
	for user, v := range natsUsers {
		c.passwords[user] = randomSecret(t)
		env = append(env, v+"="+c.passwords[user])
	}
	ports := natstest.FreePorts(t, 3*n)
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[3*i+2]))
	}
	for i := range n {
		nd := &natsNode{
			name: fmt.Sprintf("nats-%d", i+1),
			port: ports[3*i], httpPort: ports[3*i+1], clusterPort: ports[3*i+2],
			dir: t.TempDir(),
		}
		nd.logPath = filepath.Join(nd.dir, "server.log")
		c.nodes = append(c.nodes, nd)
	}
	t.Cleanup(c.stop)
	for _, nd := range c.nodes {
		args := []string{
			"-c", conf,
			"-a", "127.0.0.1", "-p", strconv.Itoa(nd.port), "-m", strconv.Itoa(nd.httpPort),
			"--cluster", fmt.Sprintf("nats://127.0.0.1:%d", nd.clusterPort),
			"--routes", strings.Join(routes, ","),
			"-l", nd.logPath,
		}
		nd.run(t, bin, args, append(append([]string(nil), env...), "SERVER_NAME="+nd.name, "E2A_NATS_STORE_DIR="+filepath.Join(nd.dir, "js")))
	}
	c.waitHealthy(30 * time.Second)
	return c
}

// waitHealthy waits until every running node reports /healthz ok (JetStream
// up, meta group with a leader, this node current).
func (c *natsCluster) waitHealthy(within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for _, nd := range c.nodes {
		if nd.exited() {
			continue
		}
		var err error
		healthy := testkit.Until(time.Until(deadline), func() bool {
			var ok bool
			if ok, err = getOK(http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/healthz", nd.httpPort)); ok {
				return true
			}
			if nd.exited() {
				c.t.Fatalf("%s exited:\n%s", nd.name, nd.logTail())
			}
			return false
		})
		if !healthy {
			c.t.Fatalf("%s not healthy after %v: %v\n%s", nd.name, within, err, nd.logTail())
		}
	}
}

func (nd *natsNode) exited() bool { return closed(nd.done) }

// getOK GETs url and reports whether it answered 200 (readiness polls).
func getOK(client *http.Client, url string) (bool, error) {
	resp, err := client.Get(url)
	if err != nil {
		return false, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

// readyOK reports whether url, a stage's /readyz, answers 200 with the
// status ready: not degraded (JetStream unavailable, which is 200 too).
func readyOK(client *http.Client, url string) (bool, error) {
	resp, err := client.Get(url)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"status":"ready"`), err
}

func (nd *natsNode) logTail() string {
	return fileTail(4000, filepath.Join(nd.dir, "stderr.log"), nd.logPath)
}

// closed reports whether ch is closed (a process's done channel).
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// fileTail returns the last n bytes of the files' contents, one after the
// other.
func fileTail(n int, paths ...string) string {
	var b []byte
	for _, p := range paths {
		x, _ := os.ReadFile(p)
		b = append(b, x...)
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// fileHead returns the first n bytes of a file.
func fileHead(n int, path string) string {
	b, _ := os.ReadFile(path)
	return string(b[:min(n, len(b))])
}

// URL lists every node's client URL.
func (c *natsCluster) URL() string {
	var urls []string
	for _, nd := range c.nodes {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", nd.port))
	}
	return strings.Join(urls, ",")
}

// node returns the node called name.
func (c *natsCluster) node(name string) *natsNode {
	for _, nd := range c.nodes {
		if nd.name == name {
			return nd
		}
	}
	return nil
}

// run starts nd's nats-server process (bin with args, environment env; nil:
// this process's). Its output, before the log file is open, is appended to
// stderr.log in nd.dir: a restarted node keeps the earlier lines.
func (nd *natsNode) run(t testing.TB, bin string, args, env []string) {
	t.Helper()
	out, err := os.OpenFile(filepath.Join(nd.dir, "stderr.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	nd.cmd = exec.Command(bin, args...)
	nd.cmd.Env = env
	nd.cmd.Stdout, nd.cmd.Stderr = out, out
	if err := nd.cmd.Start(); err != nil {
		_ = out.Close()
		t.Fatalf("start %s: %v", nd.name, err)
	}
	nd.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		_ = out.Close()
		close(done)
	}(nd.cmd, nd.done)
}

// kill crashes a node: SIGKILL, no lame duck, no leadership hand-over,
// nothing flushed.
func (nd *natsNode) kill(t testing.TB) {
	t.Helper()
	_ = nd.cmd.Process.Signal(syscall.SIGKILL)
	testkit.Receive(t, nd.done, 10*time.Second, "%s did not die", nd.name)
}

// kill crashes one of c's nodes (natsNode.kill).
func (c *natsCluster) kill(nd *natsNode) { nd.kill(c.t) }

func (c *natsCluster) stop() {
	for _, nd := range c.nodes {
		if nd.cmd != nil && nd.cmd.Process != nil && !nd.exited() {
			_ = nd.cmd.Process.Signal(syscall.SIGKILL)
			<-nd.done
		}
	}
	if c.t.Failed() {
		for _, nd := range c.nodes {
			c.t.Logf("---- %s log (tail)\n%s", nd.name, nd.logTail())
		}
	}
}

// errSink collects a connection's asynchronous errors (permission
// violations arrive that way).
type errSink struct {
	mu   sync.Mutex
	errs []error
	ch   chan struct{}
}

func (s *errSink) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// String lists the errors collected so far.
func (s *errSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.errs)
}

// waitFor waits until an error containing all of subs arrived.
func (s *errSink) waitFor(within time.Duration, subs ...string) error {
	deadline := time.After(within)
	for {
		s.mu.Lock()
		for _, e := range s.errs {
			ok := true
			for _, sub := range subs {
				ok = ok && strings.Contains(strings.ToLower(e.Error()), strings.ToLower(sub))
			}
			if ok {
				s.mu.Unlock()
				return nil
			}
		}
		s.mu.Unlock()
		select {
		case <-s.ch:
		case <-deadline:
			return fmt.Errorf("no error containing %q", subs)
		}
	}
}

// connect connects as user with the production connection code
// (streams.Connect), reconnecting fast.
func (c *natsCluster) connect(user string) (*nats.Conn, *errSink) {
	c.t.Helper()
	return c.connectURL(user, c.URL())
}

// connectNode is connect to nd first: the client learns the other nodes
// from it, and reconnects to one of them only when nd goes away.
func (c *natsCluster) connectNode(user string, nd *natsNode) (*nats.Conn, *errSink) {
	c.t.Helper()
	return c.connectURL(user, fmt.Sprintf("nats://127.0.0.1:%d", nd.port))
}

func (c *natsCluster) connectURL(user, url string) (*nats.Conn, *errSink) {
	c.t.Helper()
	sink := &errSink{ch: make(chan struct{}, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := streams.Connect(ctx, streams.ConnConfig{
		NatsURL: url, User: user, Password: c.passwords[user], TLSCA: c.tls.CA,
		Name: "e2a-test-" + user, ReconnectWait: 100 * time.Millisecond,
	}, nats.ErrorHandler(sink.handler))
	if err != nil {
		c.t.Fatalf("connect as %s: %v", user, err)
	}
	c.t.Cleanup(nc.Close)
	return nc, sink
}

// jsz reads a node's /jsz with every account's streams.
func (nd *natsNode) jsz() (*server.JSInfo, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/jsz?accounts=true&streams=true", nd.httpPort))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var z server.JSInfo
	return &z, json.NewDecoder(resp.Body).Decode(&z)
}

// waitStreamsSynced waits until every running node's replica of each
// stream holds the same last sequence. A direct get may be answered by any
// replica: a test's read of what is stored, once the writers are done,
// waits for this first (a follower a message behind answers without it).
func (c *natsCluster) waitStreamsSynced(within time.Duration, names ...string) {
	c.t.Helper()
	var err error
	defer func() {
		if c.t.Failed() && err != nil {
			c.t.Logf("last difference: %v", err)
		}
	}()
	testkit.Eventually(c.t, within, fmt.Sprintf("every replica of %v at the same last sequence", names), func() bool {
		err = c.streamsSynced(names)
		return err == nil
	})
}

func (c *natsCluster) streamsSynced(names []string) error {
	var nodes []*server.JSInfo
	for _, nd := range c.nodes {
		if nd.exited() {
			continue
		}
		z, err := nd.jsz()
		if err != nil {
			return fmt.Errorf("%s: %w", nd.name, err)
		}
		nodes = append(nodes, z)
	}
	_, err := natstest.SameLastSeqs(nodes, names...)
	return err
}
