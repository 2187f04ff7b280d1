package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/bench"
)

// TestBenchReplicas runs `e2a bench --replicas 1,2` with the built binary:
// it starts one, then two serve and agent processes on its JetStream
// server, drives them closed loop then open loop at a fixed rate, and
// reports a row per N with every request answered and each kind of
// process's CPU measured. No speed is asserted (shared machines are noisy).
func TestBenchReplicas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2aBin, "bench", "--replicas", "1,2", "--requests", "200", "--warmup", "20",
		"--concurrency", "8", "--protocol", "e2a-sse", "--rates", "100", "--sweep-seconds", "1", "--json")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("bench --replicas: %v\n%s\n%s", err, out, stderr)
	}
	var rep bench.ReplicasReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	if len(rep.Rows) != 2 || rep.Rows[0].N != 1 || rep.Rows[1].N != 2 {
		t.Fatalf("rows %+v", rep.Rows)
	}
	for _, r := range rep.Rows {
		if r.OK != 200 || r.Failed != 0 || r.RPS <= 0 || r.CPUServe <= 0 || r.CPUAgent <= 0 || r.TTFF99 <= 0 ||
			r.PeakRSSServe < 1 || r.PeakRSSAgent < 1 {
			t.Fatalf("N=%d: %+v", r.N, r)
		}
		// One open-loop phase at 100 requests/s: at least 200 requests.
		if len(r.Rates) != 1 || r.Rates[0].Offered != 100 || r.Rates[0].OK != 200 || r.Rates[0].Failed != 0 ||
			r.Rates[0].TTFF.P99 <= 0 || r.Rates[0].CPUServe <= 0 || r.Rates[0].CPUAgent <= 0 {
			t.Fatalf("N=%d open loop: %+v", r.N, r.Rates)
		}
	}
}
