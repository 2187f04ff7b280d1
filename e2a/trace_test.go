package e2a

import (
	"fmt"
	"strings"
	"testing"
)

func TestValidTraceparent(t *testing.T) {
	for s, want := range map[string]bool{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01":        true,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00":        true,
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future": true,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x":      false, // version 00 has exactly 4 fields
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01":        false,
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01":        false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01":        false,
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01":        false, // upper case
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7":           false,
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01":        false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n":      false,
		"":          false,
		"not-valid": false,
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x": false,
	} {
		if got := ValidTraceparent(s); got != want {
			t.Errorf("ValidTraceparent(%q) = %v", s, got)
		}
	}
}

func TestCleanTracestate(t *testing.T) {
	if got := CleanTracestate("a=1", "", "b=2"); got != "a=1,b=2" {
		t.Errorf("join: %q", got)
	}
	if got := CleanTracestate(strings.Repeat("a", 513)); got != "" {
		t.Error("over 512 characters kept")
	}
	if got := CleanTracestate("a=\x01"); got != "" {
		t.Error("control character kept")
	}
	members := func(n int) string {
		m := make([]string, n)
		for i := range m {
			m[i] = fmt.Sprintf("v%02d=1", i)
		}
		return strings.Join(m, ",")
	}
	for _, ts := range []string{
		"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",
		"a=1 , b=2,,  ,c=3",
		"tenant1@sys=x y,0t@s=v,k_-*/9=!~",
		"k=" + strings.Repeat("v", 256),
		members(32),
	} {
		if got := CleanTracestate(ts); got != ts {
			t.Errorf("CleanTracestate(%q) = %q, want it kept as is", ts, got)
		}
	}
	for _, ts := range []string{
		members(33),
		"a=1,a=2",             // duplicate key
		"a",                   // no "="
		"A=1",                 // upper-case key
		"1a=1",                // a simple key starts with a letter
		"a@1s=1",              // a system id starts with a letter
		"a@abcdefghijklmno=1", // system id over 14
		"a=",                  // empty value
		"a=b=c",               // "=" in the value
		"a =1",                // space in the member
		"k=" + strings.Repeat("v", 257),
		strings.Repeat("k", 257) + "=1",
	} {
		if got := CleanTracestate(ts); got != "" {
			t.Errorf("CleanTracestate(%q) = %q, want it dropped", ts, got)
		}
	}
}

func TestCleanTrace(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if CleanTrace(nil) != nil || CleanTrace(&TraceContext{Traceparent: "00-x", Tracestate: "a=1"}) != nil {
		t.Error("an invalid traceparent was kept")
	}
	ok := &TraceContext{Traceparent: tp, Tracestate: "a=1"}
	if got := CleanTrace(ok); got != ok {
		t.Errorf("a valid trace context was changed: %+v", got)
	}
	bad := &TraceContext{Traceparent: tp, Tracestate: "A=1"}
	if got := CleanTrace(bad); got == nil || *got != (TraceContext{Traceparent: tp}) || bad.Tracestate != "A=1" {
		t.Errorf("CleanTrace(%+v) = %+v: want the tracestate dropped in a copy", bad, got)
	}
}
