package bench

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestRecovery runs e2a bench --recovery's scenario, smaller: a worker of
// three is killed mid-stream; each of its requests must go on with another
// worker within RecoveryTarget, every stream whole and exactly once, and no
// live worker's request moved.
func TestRecovery(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := RunRecovery(ctx, RecoveryConfig{Workers: 3, Requests: 12, Frames: 20, Delay: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.Text())
	if rep.Held == 0 || rep.Resumed != rep.Held || len(rep.Delays) != rep.Held {
		t.Errorf("killed %s held %d requests, %d resumed (%d delays)", rep.Killed, rep.Held, rep.Resumed, len(rep.Delays))
	}
	if rep.Complete != 12 || rep.TakenOver != 0 || rep.Errors != nil {
		t.Errorf("complete %d of 12, taken over %d, errors %v", rep.Complete, rep.TakenOver, rep.Errors)
	}
	if p99 := rep.Percentile(0.99); p99 > RecoveryTarget || p99 <= 0 {
		t.Errorf("p99 kill → resumed %v, want in (0, %v]", p99, RecoveryTarget)
	}
	if !rep.OK() || !strings.Contains(rep.Text(), ": OK") {
		t.Errorf("report not OK:\n%s", rep.Text())
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil || out["ok"] != true || out["resume_p99_ms"].(float64) <= 0 || out["killed"] != rep.Killed {
		t.Errorf("JSON report %s: %v", b, err)
	}
}

func TestRecoveryConfigRefused(t *testing.T) {
	for _, c := range []RecoveryConfig{
		{Workers: 1},
		{Frames: 4},
		{Delay: time.Millisecond},
		{AckWait: 500 * time.Millisecond},
		{Requests: -1},
		{Kill: "process"},
		{Kill: KillServe, Workers: -1},
	} {
		if _, err := RunRecovery(context.Background(), c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// TestRecoveryPercentileNearestRank: the resume delays' percentiles are
// nearest rank, ceil(q·n)−1, as the load phases' (percentiles): with 100
// resumed streams the p99 is the 99th smallest, not the maximum, so one
// slow stream of 100 does not turn the verdict SHORT; the p50 of an even
// count is the lower of the two middle values.
func TestRecoveryPercentileNearestRank(t *testing.T) {
	cfg := DefaultRecoveryConfig()
	cfg.Requests = 100
	r := &RecoveryReport{Config: cfg, Killed: "w0", Held: 100, Resumed: 100, Complete: 100}
	for i := range 99 {
		r.Delays = append(r.Delays, time.Duration(100+i)*time.Millisecond)
	}
	r.Delays = append(r.Delays, 30*time.Second) // one slow stream of 100
	if got, want := r.Percentile(0.99), r.Delays[98]; got != want {
		t.Errorf("p99 of 100 delays = %v, want the 99th smallest %v (nearest rank, as the load phases' percentiles)", got, want)
	}
	if got := r.Percentile(0); got != r.Delays[0] {
		t.Errorf("p0 = %v, want the minimum %v", got, r.Delays[0])
	}
	if got := r.Percentile(1); got != 30*time.Second {
		t.Errorf("p100 = %v, want the maximum 30s", got)
	}
	if !r.OK() {
		t.Errorf("99 of 100 streams resumed within %v, yet the verdict is SHORT (p99 %v)", r.Target(), r.Percentile(0.99))
	}
	two := &RecoveryReport{Delays: []time.Duration{time.Second, 3 * time.Second}}
	if got := two.Percentile(0.5); got != time.Second {
		t.Errorf("p50 of [1s 3s] = %v, want 1s (percentiles gives %v)", got, time.Duration(percentiles([]time.Duration{time.Second, 3 * time.Second}).P50*1e6))
	}
}
