//go:build !unix

package bench

import (
	"os/exec"
	"syscall"
	"time"
)

// processCPU is not measured on this platform.
func processCPU() time.Duration { return 0 }

// childAttr is the default on this platform.
func childAttr() *syscall.SysProcAttr { return nil }

// terminate kills cmd's process.
func terminate(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
