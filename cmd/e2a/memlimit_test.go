package main

// Go's soft memory limit with headroom below the container's (session 45,
// brief h12). The shipped pods set GOMEMLIMIT to 100 % of the container's
// memory limit, so the collector worked hardest exactly when the kernel
// OOM-killed the container: what Go does not manage (stacks beyond the
// heap's goal, the page cache charged to the cgroup, fragmentation) has no
// room. E2A_MEMORY_LIMIT gives the process the container's limit, and it
// sets its own to 90 % of it.

import (
	"context"
	"errors"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// keepMemoryLimit sets the runtime's memory limit to a known value for the
// test and puts the previous one back after it.
func keepMemoryLimit(t *testing.T, known int64) {
	t.Helper()
	prev := debug.SetMemoryLimit(known)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
}

// TestMemoryLimitHeadroom: with E2A_MEMORY_LIMIT the process (run, as
// main calls it, before any command) sets Go's memory limit to 90 % of it; with GOMEMLIMIT set
// too, or without E2A_MEMORY_LIMIT, it leaves the runtime's alone. Before:
// E2A_MEMORY_LIMIT was read by nothing, the limit stayed where it was.
func TestMemoryLimitHeadroom(t *testing.T) {
	const known = 123 << 20
	for _, c := range []struct {
		name      string
		limit     string
		gomem     string
		wantLimit int64
	}{
		{"limit given", "1073741824", "", 1073741824 - 107374182},
		{"512Mi container", "536870912", "", 536870912 - 53687091},
		{"GOMEMLIMIT wins", "1073741824", "700MiB", known},
		{"GOMEMLIMIT off wins", "1073741824", "off", known},
		{"unset", "", "", known},
		{"zero is off", "0", "", known},
	} {
		t.Run(c.name, func(t *testing.T) {
			keepMemoryLimit(t, known)
			t.Setenv("E2A_MEMORY_LIMIT", c.limit)
			if c.limit == "" {
				os.Unsetenv("E2A_MEMORY_LIMIT") // t.Setenv puts it back
			}
			t.Setenv("GOMEMLIMIT", c.gomem)
			// A command run does not know: it returns after the
			// configuration, printing nothing.
			if err := run(context.Background(), []string{"no-such-command"}); !errors.Is(err, errUsage) {
				t.Fatalf("e2a no-such-command: %v", err)
			}
			if got := debug.SetMemoryLimit(-1); got != c.wantLimit {
				t.Errorf("E2A_MEMORY_LIMIT=%q GOMEMLIMIT=%q: runtime memory limit %d, want %d", c.limit, c.gomem, got, c.wantLimit)
			}
		})
	}
}

// TestMemoryLimitRefusedNamingVariable: a value that is no byte count, a
// negative one, and one far below any container's (resourceFieldRef with a
// divisor, "256" meaning MiB, which would have run the collector without
// pause) stop the process at start naming E2A_MEMORY_LIMIT. Before: every
// one was accepted (the variable was read by nothing).
func TestMemoryLimitRefusedNamingVariable(t *testing.T) {
	for _, v := range []string{"abc", "1.5Gi", "512MiB", "-1", "256", "16777215"} {
		t.Run(v, func(t *testing.T) {
			t.Setenv("E2A_MEMORY_LIMIT", v)
			if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), "E2A_MEMORY_LIMIT") {
				t.Errorf("E2A_MEMORY_LIMIT=%s: LoadConfig %v, want an error naming E2A_MEMORY_LIMIT", v, err)
			}
		})
	}
	for _, v := range []string{"0", "16777216", "268435456"} {
		t.Run("ok "+v, func(t *testing.T) {
			t.Setenv("E2A_MEMORY_LIMIT", v)
			if _, err := LoadConfig(); err != nil {
				t.Errorf("E2A_MEMORY_LIMIT=%s refused: %v", v, err)
			}
		})
	}
}

// TestMemoryLimitInProcess: `e2a agent` run as the manifests run it, with
// E2A_MEMORY_LIMIT the container's 256 MiB and no GOMEMLIMIT, runs its
// collector at 90 % of it, as its own go_gc_gomemlimit_bytes says, and
// its start log says so (nothing said it: the limit in effect was seen
// only on /metrics).
func TestMemoryLimitInProcess(t *testing.T) {
	env := embeddedEnv("E2A_METRICS_ADDR=127.0.0.1:0",
		"E2A_LOG_FORMAT=json", "E2A_MEMORY_LIMIT=268435456", "GOMEMLIMIT=")
	_, stderr := startBin(t, env, "agent", "--pool", "demo")
	memLine := regexp.MustCompile(`^\{.*"msg":"Go memory limit set".*\}$|"msg":"agent pool running"`)
	if m, seen := waitLine(t, stderr, memLine); !strings.Contains(m[0], `"E2A_MEMORY_LIMIT":268435456`) || !strings.Contains(m[0], `"go_memory_limit":241591911`) {
		t.Fatalf("no start log line with the memory limit applied before %q:\n%s", m[0], strings.Join(seen, "\n"))
	}
	_, metrics := splitAddrs(t, stderr, "agent pool running")
	want := regexp.MustCompile(`\ngo_gc_gomemlimit_bytes 2\.41591911e\+08\n`) // 268435456 - 26843545
	var body string
	testkit.Eventually(t, 10*time.Second, "go_gc_gomemlimit_bytes on /metrics", func() bool {
		var code int
		code, body = httpGet(t, metrics+"/metrics")
		return code == 200 && strings.Contains(body, "\ngo_gc_gomemlimit_bytes ")
	})
	if !want.MatchString(body) {
		t.Errorf("go_gc_gomemlimit_bytes is not 241591911: %s", regexp.MustCompile(`\ngo_gc_gomemlimit_bytes [^\n]*`).FindString(body))
	}
}
