package bench

import (
	"strings"
	"testing"
)

func TestWarmMemory(t *testing.T) {
	m, err := WarmMemory(16)
	if err != nil {
		t.Fatal(err)
	}
	if m.MiB != 16 || m.Seconds <= 0 {
		t.Fatalf("%+v", m)
	}
	for i, us := range m.MicrosPerPage {
		if us <= 0 {
			t.Errorf("eighth %d: %v µs per page", i, us)
		}
	}
	if s := m.String(); !strings.Contains(s, "16 MiB touched and released") {
		t.Errorf("String() = %q", s)
	}
}

func TestWarmMemoryRefuses(t *testing.T) {
	for _, mib := range []int{0, -1, 1 << 40} {
		if m, err := WarmMemory(mib); err == nil {
			t.Errorf("WarmMemory(%d) = %+v, want an error", mib, m)
		}
	}
	cfg := DefaultConfig()
	cfg.WarmMemoryMiB = -1
	if err := cfg.fill(); err == nil {
		t.Error("fill accepted a negative warm memory")
	}
}

func TestParseMemAvailable(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"MemTotal:       24684092 kB\nMemFree:        18844488 kB\nMemAvailable:   20971520 kB\n", 20480, true},
		{"MemTotal:       24684092 kB\n", 0, false},
		{"MemAvailable:   x kB\n", 0, false},
		{"MemAvailable:   1024 MB\n", 0, false},
	} {
		got, ok := parseMemAvailable(strings.NewReader(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("parseMemAvailable(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
