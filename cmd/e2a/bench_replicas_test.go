package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// TestBenchRecoveryCLI runs `e2a bench --recovery --json` with the built
// binary for each kill: the load flags given replace the scenario's
// defaults, and the report says every stream went on, whole and exactly
// once. The process kills run this binary's serve and agent processes and
// SIGKILL one.
func TestBenchRecoveryCLI(t *testing.T) {
	for _, c := range []struct {
		kill    string
		workers int
		// AckWait 2 s: a worker's request resumes at most 2 s after its
		// last heartbeat, 1.9 s measured (with the default 4 s it takes
		// about 3.9 s, so 3.5 s tells the flag took effect and leaves a
		// loaded machine 1.5 s); a reconnected client reads the next frame
		// as soon as it is written.
		maxP99 float64
	}{
		{bench.KillWorker, 2, 3500},
		{bench.KillAgent, 2, 3500},
		{bench.KillServe, 1, 1000},
	} {
		t.Run(c.kill, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, e2aBin, "bench", "--recovery", "--kill", c.kill, "--json", "--workers", strconv.Itoa(c.workers),
				"--requests", "6", "--frames", "12", "--delay", "50ms", "--ack-wait", "2s")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("bench --recovery: %v\n%s\n%s", err, out, stderr.String())
			}
			var rep struct {
				Config struct {
					Kill                      string
					Workers, Requests, Frames int
					Delay                     int64 `json:"delay_ns"`
					AckWait                   int64 `json:"ack_wait_ns"`
				}
				Held, Resumed, Complete int
				P99                     float64 `json:"resume_p99_ms"`
				OK                      bool
			}
			if err := json.Unmarshal(out, &rep); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			cf := rep.Config
			if cf.Kill != c.kill || cf.Workers != c.workers || cf.Requests != 6 || cf.Frames != 12 || cf.Delay != int64(50*time.Millisecond) ||
				cf.AckWait != int64(2*time.Second) {
				t.Errorf("config %+v: the flags were not applied", cf)
			}
			if !rep.OK || rep.Held == 0 || rep.Resumed != rep.Held || rep.Complete != 6 || rep.P99 > c.maxP99 {
				t.Errorf("report %s", out)
			}
		})
	}
}

// TestBenchRefusesModeCombinations: e2a bench runs one mode (--recovery,
// --duration, --replicas, --bridge, --peer, else the in-process or
// --target bench); two at once, or --target or --chart with a mode, are
// refused up front, naming both flags, with exit 1 as the other refused
// combinations, rather than one mode run and the other flags dropped.
func TestBenchRefusesModeCombinations(t *testing.T) {
	soak := []string{"bench", "--duration", "1s", "--interval", "1s", "--rate", "5", "--json"}
	chart := filepath.Join(t.TempDir(), "latency.png")
	for _, c := range []struct {
		args []string
		flag string
	}{
		{append(soak[:len(soak):len(soak)], "--target", "http://127.0.0.1:1"), "--target"},
		{append(soak[:len(soak):len(soak)], "--bridge", bench.BridgeOpenAI), "--bridge"},
		{append(soak[:len(soak):len(soak)], "--replicas", "1"), "--replicas"},
		{append(soak[:len(soak):len(soak)], "--peer", bench.PeerA2AGo), "--peer"},
		{append(soak[:len(soak):len(soak)], "--chart", chart), "--chart"},
		{[]string{"bench", "--replicas", "1", "--peer", bench.PeerA2AGo}, "--peer"},
		{[]string{"bench", "--bridge", bench.BridgeOpenAI, "--chart", chart}, "--chart"},
		{[]string{"bench", "--peer", bench.PeerA2AGo, "--target", "http://127.0.0.1:1"}, "--target"},
	} {
		code, out, errOut := runBin(t, nil, c.args...)
		mode := c.args[1]
		if code != 2 || out != "" || !strings.Contains(errOut, mode) || !strings.Contains(errOut, c.flag) {
			t.Errorf("e2a %s: exit %d, stdout %.200q, stderr %q; want exit 2 (bad arguments) naming %s and %s", strings.Join(c.args, " "), code, out, errOut, mode, c.flag)
		}
	}
	if _, err := os.Stat(chart); !os.IsNotExist(err) {
		t.Errorf("a refused bench wrote the chart (%v)", err)
	}
}
