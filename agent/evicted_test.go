package agent_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestEvictedFramesEndRequest: a request whose stored frames E2A_RESPONSES
// dropped (DiscardOld at its byte limit, simulated by a purge of its
// response subject) while its handler was still writing is not taken for
// fenced by another worker and redelivered (the handler ran again from the
// start: an upstream called twice, a live client given one answer made of
// two). It ends with a retryable e2a.error after the frames written, and
// the handler runs once.
func TestEvictedFramesEndRequest(t *testing.T) {
	s := startServer(t)
	const pool, id = "evicted", "req-evicted-1"
	reg := prometheus.NewRegistry()
	var calls atomic.Int32
	wrote, release := make(chan struct{}, 1), make(chan struct{})
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		calls.Add(1)
		if err := w.Chunk(e2a.DeltaText, "first answer, frame 0"); err != nil {
			return err
		}
		if err := w.Sync(); err != nil {
			return err
		}
		select {
		case wrote <- struct{}{}:
		default:
		}
		<-release
		for i := 1; i < 4; i++ {
			if err := w.Chunk(e2a.DeltaText, fmt.Sprintf(" frame %d", i)); err != nil {
				return err
			}
			if err := w.Sync(); err != nil {
				return err
			}
		}
		return w.Complete(nil)
	})
	startWorker(t, s.connect(t), pool, h, agent.WithAckWait(time.Second), agent.WithMetrics(reg))
	waitConsumer(t, s.js, pool)
	publish(t, s.js, pool, request(id, nil))
	testkit.Receive(t, wrote, 10*time.Second, "the handler did not write its first frame")

	// The stream drops the request's frames (another tenant's answers
	// filled E2A_RESPONSES).
	subj, err := subjects.Response(id)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := s.js.Stream(ctx, streams.ResponsesStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
		t.Fatal(err)
	}
	close(release)

	var fr []*e2a.Response
	testkit.Eventually(t, 10*time.Second, "a final frame of "+id, func() bool {
		fr, _ = storedFrames(t, s.nc, id)
		return len(fr) > 0 && fr[len(fr)-1].IsFinal
	})
	// The delivery is acked (a fenced one is left unacked and comes back
	// after the ack wait, run again): nothing can redeliver it.
	name, err := streams.AgentConsumerName(pool)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the request's delivery acked", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := s.js.Consumer(ctx, streams.RequestsStream, name)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumAckPending == 0 && info.AckFloor.Stream >= 1
	})
	if n := calls.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want 1 (the request was redelivered and run again)", n)
	}
	fr, _ = storedFrames(t, s.nc, id)
	if len(fr) != 1 {
		t.Fatalf("stored frames after the purge: %d, want 1 (the final error): %+v", len(fr), fr)
	}
	last := fr[0]
	if !last.IsFinal || last.ResponseKind != e2a.KindError || last.Sequence != 1 {
		t.Fatalf("final frame: kind %s, final %v, sequence %d; want a final e2a.error at sequence 1 (after frame 0)",
			last.ResponseKind, last.IsFinal, last.Sequence)
	}
	eb, err := last.Error()
	if err != nil {
		t.Fatal(err)
	}
	if eb.Code != "frames_evicted" || !eb.Retryable {
		t.Fatalf("final error: code %q retryable %v (%s); want frames_evicted, retryable", eb.Code, eb.Retryable, eb.Message)
	}
	if n := metricValue(t, reg, "e2a_agent_requests_handled_total", map[string]string{"outcome": agent.OutcomeFenced}); n != 0 {
		t.Fatalf("outcome fenced counted %v times, want 0", n)
	}
	waitMetric(t, reg, "e2a_agent_requests_handled_total", map[string]string{"outcome": agent.OutcomeFailed}, 1)
}
