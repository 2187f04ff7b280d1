package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const natsServerModule = "github.com/nats-io/nats-server/v2"

// goTool returns the go command.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// natsServerVersion returns the version of nats-server this module
// requires (go.mod), or the linked one when debug information has it.
func natsServerVersion(t testing.TB) string {
	t.Helper()
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == natsServerModule {
				if d.Replace != nil {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	out, err := exec.Command(goTool(), "list", "-m", "-f", "{{.Version}}", natsServerModule).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", natsServerModule, err)
	}
	return strings.TrimSpace(string(out))
}

var (
	natsBinOnce sync.Once
	natsBinPath string
	natsBinErr  string
)

// natsServerBinary returns the path of a nats-server binary built from the
// module version this module requires: `go build github.com/nats-io/
// nats-server/v2`, run in this module so that go.mod and go.sum pin it.
// It is cached in os.TempDir() under the version, so that a machine builds
// it once (a few seconds with a warm build cache, since the test binary
// already compiled the server package).
func natsServerBinary(t testing.TB) string {
	t.Helper()
	version := natsServerVersion(t)
	natsBinOnce.Do(func() {
		dir := filepath.Join(os.TempDir(), "e2a-nats-server-"+version+"-"+runtime.GOOS+"-"+runtime.GOARCH)
		bin := filepath.Join(dir, "nats-server")
		if out, err := exec.Command(bin, "--version").Output(); err == nil && strings.Contains(string(out), version) {
			natsBinPath = bin
			return
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			natsBinErr = err.Error()
			return
		}
		// Build to a private name, then rename: concurrent test binaries
		// never see a half-written file.
		tmp := bin + ".tmp-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		cmd := exec.Command(goTool(), "build", "-o", tmp, natsServerModule)
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			_ = os.Remove(tmp)
			natsBinErr = "go build " + natsServerModule + ": " + err.Error() + "\n" + string(out)
			return
		}
		if err := os.Rename(tmp, bin); err != nil {
			_ = os.Remove(tmp)
			natsBinErr = err.Error()
			return
		}
		t.Logf("built nats-server %s in %v", version, time.Since(start).Round(time.Millisecond))
		natsBinPath = bin
	})
	if natsBinErr != "" {
		t.Fatal(natsBinErr)
	}
	return natsBinPath
}
