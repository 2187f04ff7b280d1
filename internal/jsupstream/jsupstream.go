package jsupstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// Options choose what one Server is.
type Options struct {
	// Binding is the one interface the card declares and the server
	// serves: a2a.TransportProtocolJSONRPC (the default when empty),
	// a2a.TransportProtocolHTTPJSON or a2a.TransportProtocolGRPC.
	Binding      a2a.TransportProtocol
	V03          bool          // A2A v0.3 (the SDK's compat layer, a v0.3 card) instead of v1.0
	NoStreaming  bool          // capabilities.streaming false; streaming calls refused
	Bearer       string        // a token every A2A call must carry (else HTTP 401)
	SlowInterval time.Duration // between "slow:" chunks (default 50 ms)
	SlowChunks   int           // "slow:" completes after this many (default 1200)
}

// Server is one running server.mjs.
type Server struct {
	base   string
	iface  string
	cmd    *exec.Cmd
	cancel context.CancelFunc
	stderr *testkit.Buffer
	done   chan struct{}
}

// Call is one call the server received: over JSON-RPC under the request's
// method (v1.0's or v0.3's), over HTTP+JSON and gRPC under its v1.0 method
// name as the SDK's request handler got it (a call refused for want of the
// bearer token: the HTTP method and path, or the gRPC method).
type Call struct {
	Method    string         `json:"method"`
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Text      string         `json:"text"`
	Headers   map[string]any `json:"headers"`
	Refused   bool           `json:"refused"`
}

// Execution is one turn the agent ran.
type Execution struct {
	Scenario  string   `json:"scenario"`
	TaskID    string   `json:"taskId"`
	ContextID string   `json:"contextId"`
	Text      string   `json:"text"`
	Continued bool     `json:"continued"`
	History   []string `json:"history"` // the first text of each message of the stored task
}

// Record is what the server received so far.
type Record struct {
	Calls      []Call      `json:"calls"`
	Executions []Execution `json:"executions"`
	Cancels    []string    `json:"cancels"`
}

// Start runs a server for a test and stops it at the test's cleanup.
// Without node it skips the test, or fails it under CI=true.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s, err := New(o)
	if errors.Is(err, ErrNoNode) && os.Getenv("CI") != "true" {
		t.Skip(err.Error() + ": install Node.js ≥ 20 (Debian: apt-get install nodejs npm; .ci/run does)")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// RunScript runs script, an ES module (process.argv.slice(1) are args),
// with node in Dir, where the pinned SDKs are installed (npm ci when they
// are not), and returns its stdout: a test's own use of the SDK's client.
// As Start, it skips the test without node except under CI=true, where it
// fails it.
func RunScript(t testing.TB, script string, args ...string) []byte {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil && os.Getenv("CI") != "true" {
		t.Skip(ErrNoNode.Error() + ": install Node.js ≥ 20 (Debian: apt-get install nodejs npm; .ci/run does)")
	}
	if err != nil {
		t.Fatalf("%v: %v", ErrNoNode, err)
	}
	if err := install(Dir()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"--input-type=module", "-e", script, "--"}, args...)...)
	cmd.Dir = Dir()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	return out
}

// Dir is the directory of server.mjs and the pinned node_modules.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "jsclient")
}

var installMu sync.Mutex

// installed are the packages server.mjs loads: the SDK and the peers its
// HTTP+JSON (express) and gRPC (@grpc/grpc-js, @bufbuild/protobuf)
// transports need.
var installed = []string{"@a2a-js/sdk", "a2a-js-sdk-03", "express", "@grpc/grpc-js", "@bufbuild/protobuf"}

// install runs npm ci in dir when one of the pinned packages is not
// installed (a node_modules from before the lockfile pinned it).
func install(dir string) error {
	installMu.Lock()
	defer installMu.Unlock()
	missing := false
	for _, p := range installed {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(p), "package.json")); err != nil {
			missing = true
		}
	}
	if !missing {
		return nil
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci in %s: %v\n%s", dir, err, out)
	}
	return nil
}

func (o Options) args() ([]string, error) {
	if o.SlowInterval < 0 || o.SlowChunks < 0 {
		return nil, fmt.Errorf("%w: negative slow interval or chunk count", ErrInvalidOption)
	}

	args := []string{"server.mjs"}
	switch o.Binding {
	case "", a2a.TransportProtocolJSONRPC:
	case a2a.TransportProtocolHTTPJSON:
		args = append(args, "--binding", "rest")
	case a2a.TransportProtocolGRPC:
		args = append(args, "--binding", "grpc")
	default:
		return nil, fmt.Errorf("%w: binding %q", ErrInvalidOption, o.Binding)
	}
	if o.V03 {
		args = append(args, "--v03")
	}
	if o.NoStreaming {
		args = append(args, "--no-streaming")
	}
	if o.Bearer != "" {
		args = append(args, "--bearer", o.Bearer)
	}
	if o.SlowInterval > 0 {
		args = append(args, "--slow-ms", strconv.FormatInt(o.SlowInterval.Milliseconds(), 10))
	}
	if o.SlowChunks > 0 {
		args = append(args, "--slow-chunks", strconv.Itoa(o.SlowChunks))
	}
	return args, nil
}

// New runs `node server.mjs` and waits (up to a minute) for the URL it
// prints; Close stops it.
func New(o Options) (*Server, error) {
	args, err := o.args()
	if err != nil {
		return nil, err
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNode, err)
	}
	dir := Dir()
	if err := install(dir); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cancel: cancel, stderr: &testkit.Buffer{}, done: make(chan struct{})}
	s.cmd = exec.CommandContext(ctx, node, args...)
	s.cmd.Dir, s.cmd.Stderr = dir, s.stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	if err := s.readURL(out); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// readURL waits for the line {"url": …} that server.mjs prints when it
// listens.
func (s *Server) readURL(out io.Reader) error {
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- l
	}()
	var l string
	select {
	case l = <-line:
	case <-s.done:
		return fmt.Errorf("node server.mjs exited before listening: %s", s.stderr.String())
	case <-time.After(time.Minute):
		return fmt.Errorf("node server.mjs printed no URL in a minute: %s", s.stderr.String())
	}
	var v struct{ URL, Interface string }
	if err := json.Unmarshal([]byte(l), &v); err != nil || !strings.HasPrefix(v.URL, "http://127.0.0.1:") || v.Interface == "" {
		return fmt.Errorf("node server.mjs printed %q (%v): %s", l, err, s.stderr.String())
	}
	s.base, s.iface = v.URL, v.Interface
	return nil
}

// Close stops the node process and waits for it to exit.
func (s *Server) Close() {
	s.cancel()
	<-s.done
}

// BaseURL is the server's base URL (agentcard.Resolver.Resolve takes it).
func (s *Server) BaseURL() string { return s.base }

// CardURL is the full URL of the agent card.
func (s *Server) CardURL() string { return s.base + "/.well-known/agent-card.json" }

// InterfaceURL is the one interface the card declares: the JSON-RPC or
// HTTP+JSON endpoint's URL, or the gRPC server's host:port.
func (s *Server) InterfaceURL() string { return s.iface }

// Stderr is what the node process wrote to its standard error.
func (s *Server) Stderr() string { return s.stderr.String() }

// Record fetches what the server received so far.
func (s *Server) Record(ctx context.Context) (Record, error) {
	var r Record
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/_fixture/record", nil)
	if err != nil {
		return r, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("GET /_fixture/record: %s", resp.Status)
	}
	return r, json.NewDecoder(resp.Body).Decode(&r)
}
