package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// BenchmarkRequests measures requests/s through one worker: each request
// writes 8 frames (7 chunks and the final one) with fencing.
func BenchmarkRequests(b *testing.B) {
	s := startServer(b)
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
	startWorker(b, s.connect(b), "bench", h, agent.WithConcurrency(64))
	waitConsumer(b, s.js, "bench")
	b.ResetTimer()
	start := time.Now()
	go func() {
		for i := range b.N {
			publish(b, s.js, "bench", request(fmt.Sprintf("bench-%d-%d", b.N, i), nil))
		}
	}()
	for range b.N {
		<-done
	}
	el := time.Since(start)
	b.ReportMetric(float64(b.N)/el.Seconds(), "req/s")
	b.ReportMetric(float64(8*b.N)/el.Seconds(), "frames/s")
}
