package agent_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// Point 1: two workers on one durable consumer share the load; each runs at
// most its concurrency, and together at most MaxAckPending; every request is
// handled exactly once.
func TestWorkSharingBoundedByConcurrencyAndMaxAckPending(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var (
		mu            sync.Mutex
		cur, peak     int
		curBy, peakBy = map[string]int{}, map[string]int{}
		handledBy     = map[string]int{}
		handledID     = map[string]int{}
	)
	h := func(name string) agent.Handler {
		return agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
			mu.Lock()
			cur++
			curBy[name]++
			peak = max(peak, cur)
			peakBy[name] = max(peakBy[name], curBy[name])
			handledBy[name]++
			handledID[env.RequestID]++
			mu.Unlock()
			time.Sleep(150 * time.Millisecond) // the behaviour: turns long enough to overlap
			mu.Lock()
			cur--
			curBy[name]--
			mu.Unlock()
			return w.Complete(map[string]any{"by": name})
		})
	}
	opts := []agent.Option{agent.WithConcurrency(2), agent.WithMaxAckPending(3)}
	startWorker(t, s.connect(t), "share", h("a"), opts...)
	startWorker(t, s.connect(t), "share", h("b"), opts...)
	waitConsumer(t, s.js, "share")
	const n = 12
	for i := range n {
		publish(t, s.js, "share", request(fmt.Sprintf("share-%d", i), nil))
	}
	for i := range n {
		waitFinal(t, s.nc, fmt.Sprintf("share-%d", i), 20*time.Second)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("peak in flight %d, per worker %v, handled per worker %v", peak, peakBy, handledBy)
	if peak != 3 {
		t.Errorf("peak in flight %d, want MaxAckPending 3", peak)
	}
	for name, p := range peakBy {
		if p > 2 {
			t.Errorf("worker %s ran %d at once, concurrency is 2", name, p)
		}
	}
	if handledBy["a"] == 0 || handledBy["b"] == 0 {
		t.Errorf("load not shared: %v", handledBy)
	}
	for id, c := range handledID {
		if c != 1 {
			t.Errorf("%s handled %d times", id, c)
		}
	}
}

// Point 1: a handler running 2.5× the AckWait is never redelivered, since
// the worker reports it in progress; without heartbeats the same handler is
// redelivered, and the late duplicate still cannot add a second final frame.
func TestInProgressKeepsLongHandler(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	slow := func(calls, returned *atomic.Int32) agent.Handler {
		return agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
			calls.Add(1)
			defer returned.Add(1)
			time.Sleep(2500 * time.Millisecond) // the behaviour: a handler running 2.5× the AckWait
			return w.Complete("done")
		})
	}
	var withHB, withoutHB, withHBReturned, withoutHBReturned atomic.Int32
	reg := prometheus.NewRegistry()
	startWorker(t, s.connect(t), "slow", slow(&withHB, &withHBReturned), agent.WithAckWait(time.Second), agent.WithMetrics(reg))
	startWorker(t, s.connect(t), "stall", slow(&withoutHB, &withoutHBReturned), agent.WithAckWait(time.Second), agent.WithoutHeartbeats())
	waitConsumer(t, s.js, "slow")
	waitConsumer(t, s.js, "stall")
	publish(t, s.js, "slow", request("slow-1", nil))
	publish(t, s.js, "stall", request("stall-1", nil))
	fr := waitFinal(t, s.nc, "slow-1", 10*time.Second)
	if len(fr) != 1 || withHB.Load() != 1 {
		t.Errorf("with heartbeats: %d frames, %d handler calls; want 1 and 1", len(fr), withHB.Load())
	}
	if r := metricValue(t, reg, "e2a_agent_redeliveries_total", nil); r != 0 {
		t.Errorf("redeliveries %v, want 0", r)
	}
	fr = waitFinal(t, s.nc, "stall-1", 10*time.Second)
	testkit.Eventually(t, 10*time.Second, "the redelivered duplicates to return", func() bool {
		n := withoutHB.Load()
		return n >= 2 && withoutHBReturned.Load() == n
	})
	fr2, _ := storedFrames(t, s.nc, "stall-1")
	if withoutHB.Load() < 2 || len(fr) != 1 || len(fr2) != 1 {
		t.Errorf("without heartbeats: %d handler calls (want ≥ 2), %d then %d frames (want 1)", withoutHB.Load(), len(fr), len(fr2))
	}
}
