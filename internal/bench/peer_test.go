package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunPeerSmall builds the reference server (a2a-go v0.3.3, its own
// module), runs one tiny round of each system (the pipeline over A2A and
// over E2A SSE, the reference) and checks the report holds all three with
// positive figures and every request answered. Not a timed test:
// the ratio itself is not checked.
func TestRunPeerSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := DefaultConfig()
	// 300 requests: each system's own CPU comes from its profile (10 ms a
	// sample); 60 requests of ≈ 0.3 ms left a phase's profile without a
	// pipeline sample now and then (own CPU 0: the check below failed).
	cfg.Requests, cfg.Concurrency, cfg.Warmup, cfg.WarmMemoryMiB = 300, 8, 10, 8
	rep, err := RunPeer(ctx, PeerConfig{Bench: cfg, Rounds: 1, ModuleDir: "../.."})
	if err != nil {
		t.Fatalf("RunPeer: %v", err)
	}
	for _, s := range []PeerSide{rep.Pipeline, rep.Other, rep.E2ASSE, rep.OtherE2ASSE} {
		if s.MedianRPS <= 0 || s.TTFF50 <= 0 || s.TTFF99 < s.TTFF50 || s.Failed != 0 || len(s.RPS) != 1 {
			t.Errorf("%s: %+v", s.Name, s)
		}
	}
	if rep.Other.CPUPerRequest <= 0 || rep.Other.AllocsPerRequest <= 0 || rep.RatioRPS <= 0 || rep.RatioE2ASSE <= 0 ||
		rep.E2ASSE.CPUPerRequest <= 0 || rep.E2ASSE.AllocsPerRequest <= 0 {
		t.Errorf("report %+v", rep)
	}
	// The generator's share is apart from each system's own figures: the
	// reference's measured on its rounds, the pipeline's from the profiles
	// (a small run's profile may hold no sample of it: ≥ 0).
	for _, s := range []PeerSide{rep.Pipeline, rep.E2ASSE} {
		if s.CPUPerRequest <= 0 || s.AllocsPerRequest <= 0 || s.GeneratorCPU < 0 || s.GeneratorAllocs < 0 {
			t.Errorf("%s: own %.3f ms %.0f allocs, generator %.3f ms %.0f allocs", s.Name, s.CPUPerRequest, s.AllocsPerRequest, s.GeneratorCPU, s.GeneratorAllocs)
		}
	}
	if rep.Other.GeneratorCPU <= 0 || rep.Other.GeneratorAllocs <= 0 {
		t.Errorf("reference: generator %.3f ms %.0f allocs", rep.Other.GeneratorCPU, rep.Other.GeneratorAllocs)
	}
	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil || !strings.Contains(out.String(), "a2a-go v0.3.3") || !strings.Contains(out.String(), "pipeline ÷ reference requests/s") ||
		!strings.Contains(out.String(), "pipeline over E2A SSE ÷ reference requests/s") || !strings.Contains(out.String(), "the reference at ") || !strings.Contains(out.String(), "memory warmed before the run: 8 MiB") {
		t.Errorf("text report %q (%v)", out.String(), err)
	}
	// Only a run without E2A_AUDIT (--no-audit) says so.
	if strings.Contains(out.String(), "WITHOUT E2A_AUDIT") {
		t.Errorf("a run with audit reads as one without: %q", out.String())
	}
	rep.NoAudit = true
	out.Reset()
	if err := rep.WriteText(&out); err != nil || !strings.Contains(out.String(), "WITHOUT E2A_AUDIT") {
		t.Errorf("text report without audit %q (%v)", out.String(), err)
	}
}
