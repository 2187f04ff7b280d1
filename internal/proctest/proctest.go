package proctest

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// StartTimeout bounds the wait for a program's "listening on" line.
const StartTimeout = 30 * time.Second

// Python3 returns Debian's python3 (/usr/bin/python3) when it exists, else
// the python3 on PATH; see Need for a missing one.
func Python3(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return Need(t, "python3", "install Python 3 (Debian: apt-get install python3)")
}

// Node returns the node on PATH; see Need for a missing one.
func Node(t testing.TB) string {
	t.Helper()
	return Need(t, "node", "install Node.js ≥ 20 (Debian: apt-get install nodejs)")
}

// Need returns the path of program name on PATH. When there is none, the
// test fails if CI=true and is skipped otherwise; how says how to install
// it.
func Need(t testing.TB, name, how string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found and CI=true: this test must run in CI; %s", name, how)
	}
	t.Skipf("%s not found: %s", name, how)
	return ""
}

var listening = regexp.MustCompile(`listening on:? *(?:[^ ]*:)?(\d+)\s*$`)

// Start runs program with args, waits for its "listening on <port>" line
// and returns the port. The program is killed at the test's cleanup; its
// standard error (and output after that line) is logged when the test
// failed. A program that exits or stays silent for StartTimeout fails the
// test.
func Start(t testing.TB, program string, args ...string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, program, args...)
	var errOut testkit.Buffer
	cmd.Stderr = &errOut
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", program, err)
	}
	exited := make(chan struct{})
	ports := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		found := false
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil && !found {
				found = true
				p, _ := strconv.Atoi(m[1])
				ports <- p
				continue
			}
			_, _ = errOut.Write(append(sc.Bytes(), '\n'))
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cancel() // kills the process
		<-exited
		if t.Failed() {
			t.Logf("%s %v output:\n%s", program, args, errOut.String())
		}
	})
	select {
	case p := <-ports:
		return p
	case <-exited:
		t.Fatalf("%s %v exited before listening:\n%s", program, args, errOut.String())
	case <-time.After(StartTimeout):
		t.Fatalf("%s %v did not say it listens within %v:\n%s", program, args, StartTimeout, errOut.String())
	}
	return 0
}
