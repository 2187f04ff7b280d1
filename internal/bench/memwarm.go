package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// MemoryWarmup is what WarmMemory measured: the time to touch each page of
// an anonymous mapping, by eighths. On a machine whose memory is backed as
// the guest uses it (a VM whose balloon reports free pages to its host),
// pages the guest has not used recently cost several times more than warm
// ones (measured on the README's VM: 1.3 against 10-11 µs per page), and a
// run that grows into them (the embedded server's store in the page cache,
// its heap) slows for that alone.
type MemoryWarmup struct {
	MiB     int     `json:"mib"`
	Seconds float64 `json:"seconds"`
	// MicrosPerPage is the mean time to fault in one page in each eighth of
	// the mapping, in microseconds.
	MicrosPerPage [8]float64 `json:"micros_per_page"`
}

// String describes the warm-up in one line.
func (m *MemoryWarmup) String() string {
	return fmt.Sprintf("memory warmed before the run: %d MiB touched and released in %.1f s (µs per page: %.1f in the first eighth, %.1f in the last)",
		m.MiB, m.Seconds, m.MicrosPerPage[0], m.MicrosPerPage[7])
}

// WarmMemory maps mib MiB of anonymous memory, writes one byte in each page,
// measures how long that takes and unmaps it, so that a run started right
// after it finds that much memory backed by the host. It refuses more than
// three quarters of the memory the kernel reports available (Linux), and
// is supported on Unix only.
func WarmMemory(mib int) (*MemoryWarmup, error) {
	if mib <= 0 {
		return nil, fmt.Errorf("bench: warm memory: %d MiB, want > 0", mib)
	}
	if avail, ok := availableMiB(); ok && mib > avail*3/4 {
		return nil, fmt.Errorf("bench: warm memory: %d MiB is more than 3/4 of the %d MiB available", mib, avail)
	}
	return warmMemory(mib)
}

// availableMiB reads MemAvailable from /proc/meminfo.
func availableMiB() (int, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	return parseMemAvailable(f)
}

func parseMemAvailable(r io.Reader) (int, bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("MemAvailable:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, false
		}
		kb, err := strconv.Atoi(string(f[0]))
		if err != nil {
			return 0, false
		}
		return kb / 1024, true
	}
	return 0, false
}

// touchPages writes one byte in every page of b and records the mean time
// per page of each eighth into m.
func touchPages(b []byte, page int, m *MemoryWarmup) {
	start := time.Now()
	eighth := len(b) / 8
	for i := range 8 {
		t := time.Now()
		part := b[i*eighth : (i+1)*eighth]
		n := 0
		for off := 0; off < len(part); off += page {
			part[off] = 1
			n++
		}
		if n > 0 {
			m.MicrosPerPage[i] = float64(time.Since(t).Nanoseconds()) / 1e3 / float64(n)
		}
	}
	m.Seconds = time.Since(start).Seconds()
}
