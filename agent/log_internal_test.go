package agent

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A delivery's logger carries its request id, delivery count, correlation
// id and traceparent, built on first use only.
func TestReqLogger(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewTextHandler(&buf, nil)).With("pool", "p")
	rl := &reqLogger{base: base, id: "req-1", delivery: 2, correlationID: "corr-1", traceparent: "00-abc-def-01"}
	if rl.l != nil {
		t.Fatal("logger built before use")
	}
	rl.get().Warn("handing back")
	if rl.get() != rl.l {
		t.Fatal("logger built twice")
	}
	line := buf.String()
	for _, want := range []string{"pool=p", "request_id=req-1", "delivery=2", "correlation_id=corr-1", "traceparent=00-abc-def-01", `msg="handing back"`} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q lacks %q", line, want)
		}
	}
	buf.Reset()
	(&reqLogger{base: base, id: "req-2", delivery: 1}).get().Info("x")
	if line := buf.String(); strings.Contains(line, "correlation_id") || strings.Contains(line, "traceparent") || !strings.Contains(line, "request_id=req-2") {
		t.Errorf("log line %q", line)
	}
}
