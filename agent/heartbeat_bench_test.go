package agent_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// heldRequests is how many requests BenchmarkHeldHeartbeats holds.
const heldRequests = 1000

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHeldHeartbeats measures what heartbeats cost: 1000 requests
// are held by one worker (their handler waits) with a heartbeat of 1 s
// (the default) or 15 s (the old default's 60 s / 4), while
// BenchmarkRequests' load (8 fenced frames a request) runs on another
// pool of the same server. It reports the load's requests/s, the CPU time
// of the process (server and workers) per request of the load, and the
// CPU time per second spent holding the 1000 requests with no load (3 s).
func BenchmarkHeldHeartbeats(b *testing.B) {
	for _, hb := range []time.Duration{time.Second, 15 * time.Second} {
		b.Run(fmt.Sprintf("heartbeat=%v", hb), func(b *testing.B) {
			s := startServer(b)
			release := make(chan struct{})
			defer close(release)
			var holding atomic.Int64
			held := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
				holding.Add(1)
				select {
				case <-release:
				case <-ctx.Done():
				}
				return nil
			})
			startWorker(b, s.connect(b), "held", held, agent.WithConcurrency(heldRequests), agent.WithMaxAckPending(heldRequests),
				agent.WithAckWait(time.Minute), agent.WithHeartbeat(hb))
			waitConsumer(b, s.js, "held")
			for i := range heldRequests {
				publish(b, s.js, "held", request(fmt.Sprintf("held-%d-%d", b.N, i), nil))
			}
			testkit.Eventually(b, 30*time.Second, "the requests held", func() bool { return holding.Load() == heldRequests })
			idle := cpuTime(b)
			<-time.After(3 * time.Second) // a measurement interval, not a wait for an event
			idlePerSec := (cpuTime(b) - idle) / 3

			done := make(chan struct{}, 1024)
			h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
				for range 7 {
					if err := w.Write(e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: "text", Delta: "0123456789abcdef"}, false); err != nil {
						return err
					}
				}
				err := w.Complete(map[string]any{"content": "x"})
				done <- struct{}{}
				return err
			})
			startWorker(b, s.connect(b), "load", h, agent.WithConcurrency(64))
			waitConsumer(b, s.js, "load")
			b.ResetTimer()
			start, cpu := time.Now(), cpuTime(b)
			go func() {
				for i := range b.N {
					publish(b, s.js, "load", request(fmt.Sprintf("load-%d-%d", b.N, i), nil))
				}
			}()
			for range b.N {
				<-done
			}
			el := time.Since(start)
			b.ReportMetric(float64(b.N)/el.Seconds(), "req/s")
			b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/req")
			b.ReportMetric(float64(idlePerSec.Milliseconds()), "idle-cpu-ms/s")
		})
	}
}
