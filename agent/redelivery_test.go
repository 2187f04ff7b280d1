package agent_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// crashAfter runs the demo on its own connection until the request has n
// frames, then kills the worker abruptly (connection closed, Run stopped):
// the request stays unacknowledged. The demo's writer holds after n frames,
// so the request is partial at the crash however slow the machine.
func crashAfter(t *testing.T, s *server, pool string, env *e2a.Envelope, n int) {
	t.Helper()
	nc := s.connect(t)
	held := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		return demo.New().Serve(ctx, env, &heldWriter{Writer: w, ctx: ctx, free: n})
	})
	w := startWorker(t, nc, pool, held, agent.WithAckWait(time.Second))
	waitConsumer(t, s.js, pool)
	publish(t, s.js, pool, env)
	waitFrames(t, s, env.RequestID, n)
	nc.Close()
	if err := w.stop(); err == nil {
		t.Log("Run returned nil after its connection closed")
	}
	waitNoPull(t, s.js, pool)
}

// Point 3: a redelivered partial request is resumed by a resumable handler
// after the last frame, never from sequence 0; the result equals an
// uninterrupted run.
func TestRedeliveryResumes(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	env := request("resume-1", map[string]any{"text": "resume me", "frames": 6})
	crashAfter(t, s, "resume", env, 3)
	partial, _ := storedFrames(t, s.nc, env.RequestID)
	reg := prometheus.NewRegistry()
	startWorker(t, s.connect(t), "resume", demo.New(), agent.WithAckWait(time.Second), agent.WithMetrics(reg))
	fr := waitFinal(t, s.nc, env.RequestID, 15*time.Second)
	if len(fr) != 3+6+1 {
		t.Fatalf("%d frames, want 10", len(fr))
	}
	for i, f := range partial {
		if fr[i].ResponseID != f.ResponseID {
			t.Fatalf("frame %d rewritten", i)
		}
	}
	c, _ := fr[len(fr)-1].Complete()
	if content := c.Result.(map[string]any)["content"]; content != "You said: resume me" || text(t, fr) != content {
		t.Fatalf("content %q streamed %q", content, text(t, fr))
	}
	if r := metricValue(t, reg, "e2a_agent_redeliveries_total", nil); r != 1 {
		t.Errorf("redeliveries %v, want 1", r)
	}
	t.Logf("crashed after %d frames, resumed to %d", len(partial), len(fr))
}

// Point 3: a handler that cannot resume gets a final e2a.error
// agent_interrupted, retryable, right after the existing frames; it is not
// called.
func TestRedeliveryNotResumableInterrupted(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	env := request("interrupt-1", map[string]any{"frames": 6})
	crashAfter(t, s, "intr", env, 2)
	partial, _ := storedFrames(t, s.nc, env.RequestID)
	var calls atomic.Int32
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		calls.Add(1)
		return w.Complete(nil)
	})
	reg := prometheus.NewRegistry()
	startWorker(t, s.connect(t), "intr", h, agent.WithAckWait(time.Second), agent.WithMetrics(reg))
	fr := waitFinal(t, s.nc, env.RequestID, 15*time.Second)
	last := fr[len(fr)-1]
	e, err := last.Error()
	if err != nil || e.Code != e2a.ErrCodeAgentInterrupted || !e.Retryable || last.Status != e2a.StatusFailed {
		t.Fatalf("final frame %+v %+v, want agent_interrupted retryable", last, e)
	}
	if len(fr) != len(partial)+1 || calls.Load() != 0 {
		t.Fatalf("%d frames after %d, %d handler calls", len(fr), len(partial), calls.Load())
	}
	waitMetric(t, reg, "e2a_agent_requests_handled_total", map[string]string{"outcome": agent.OutcomeInterrupted}, 1)
}

// Point 3: a redelivered request whose final frame exists is acked and left
// alone: no handler call, no frame.
func TestRedeliveryAfterFinalAcks(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := s.connect(t)
	finalWritten := make(chan struct{})
	// The handler writes its final frame, then its process dies before it
	// returns (so before the ack).
	stuck := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		err := w.Complete("first")
		close(finalWritten)
		<-ctx.Done()
		return err
	})
	w := startWorker(t, nc, "fin", stuck, agent.WithAckWait(time.Second))
	waitConsumer(t, s.js, "fin")
	publish(t, s.js, "fin", request("fin-1", nil))
	<-finalWritten
	nc.Close()
	_ = w.stop()

	var calls atomic.Int32
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		calls.Add(1)
		return w.Complete("second")
	})
	reg := prometheus.NewRegistry()
	startWorker(t, s.connect(t), "fin", h, agent.WithAckWait(time.Second), agent.WithMetrics(reg))
	waitMetric(t, reg, "e2a_agent_requests_handled_total", map[string]string{"outcome": agent.OutcomeAlreadyFinal}, 1)
	fr, _ := storedFrames(t, s.nc, "fin-1")
	if len(fr) != 1 || calls.Load() != 0 {
		t.Fatalf("%d frames, %d calls; want 1 and 0", len(fr), calls.Load())
	}
	// Acked: nothing is pending on the consumer. The ack is not awaited by
	// the worker, so the server may take it in just after the metric; wait
	// for it less than the AckWait (1 s), so only this ack can empty it.
	cons, err := s.js.Consumer(tctx(t), "E2A_REQUESTS", "agent-fin")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 800*time.Millisecond, "the redelivery acked", func() bool {
		info, err := cons.Info(tctx(t))
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	})
}

// Point 4: a request whose deliveries all stall (no heartbeat, handler
// never finishes) gets, after MaxDeliver, a final e2a.error max_deliveries
// from the advisory, fenced after the frames the deliveries wrote; the stale
// handlers are stopped.
func TestMaxDeliveriesWritesFinalError(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var calls atomic.Int32
	causes := make(chan error, 4)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		calls.Add(1)
		if err := w.Write(e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: "text", Delta: "x"}, false); err != nil {
			return err
		}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil
	})
	reg := prometheus.NewRegistry()
	startWorker(t, s.connect(t), "maxd", h, agent.WithAckWait(time.Second), agent.WithMaxDeliver(2),
		agent.WithoutHeartbeats(), agent.WithResumable(true), agent.WithMetrics(reg))
	waitConsumer(t, s.js, "maxd")
	publish(t, s.js, "maxd", request("maxd-1", nil))
	fr := waitFinal(t, s.nc, "maxd-1", 15*time.Second)
	last := fr[len(fr)-1]
	e, err := last.Error()
	if err != nil || e.Code != e2a.ErrCodeMaxDeliveries || e.Retryable {
		t.Fatalf("final %+v, want max_deliveries not retryable", e)
	}
	if len(fr) != 3 || calls.Load() != 2 {
		t.Fatalf("%d frames, %d handler calls; want 2 chunks + final, 2 calls", len(fr), calls.Load())
	}
	for range 2 {
		c := testkit.Receive(t, causes, 5*time.Second, "stale handler not stopped")
		if !errors.Is(c, agent.ErrFenced) {
			t.Errorf("stale handler cause %v, want ErrFenced", c)
		}
	}
	waitMetric(t, reg, "e2a_agent_requests_handled_total", map[string]string{"outcome": agent.OutcomeMaxDeliveries}, 1)
}

// Point 4: a request past its envelope deadline gets deadline_exceeded
// without a handler call; a handler still running at the default deadline
// is stopped (cause ErrDeadlineExceeded, later writes refused) and the
// final frame follows its frames.
func TestDeadlines(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var calls atomic.Int32
	lateWrite := make(chan error, 1)
	cause := make(chan error, 1)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		calls.Add(1)
		if err := w.Chunk(e2a.DeltaText, "working"); err != nil {
			return err
		}
		<-ctx.Done()
		cause <- context.Cause(ctx)
		// The writer closes at the deadline; the final frame follows
		// once the handler has returned (StopGrace).
		lateWrite <- w.Chunk(e2a.DeltaText, "too late")
		return ctx.Err()
	})
	startWorker(t, s.connect(t), "dl", h, agent.WithDefaultDeadline(700*time.Millisecond))
	waitConsumer(t, s.js, "dl")
	past := request("dl-past", nil)
	past.Deadline = e2a.FormatTime(time.Now().Add(-time.Second))
	publish(t, s.js, "dl", past)
	fr := waitFinal(t, s.nc, "dl-past", 10*time.Second)
	// The envelope's own deadline: sent again, the request fails the same
	// way, so not retryable.
	if e, _ := fr[0].Error(); len(fr) != 1 || e.Code != e2a.ErrCodeDeadlineExceeded || e.Retryable || calls.Load() != 0 {
		t.Fatalf("past its envelope deadline: want one deadline_exceeded, not retryable, no handler call: %d frames %+v, %d calls", len(fr), e, calls.Load())
	}
	start := time.Now()
	publish(t, s.js, "dl", request("dl-run", nil))
	fr = waitFinal(t, s.nc, "dl-run", 10*time.Second)
	// The pool's default deadline: a retry may land on a faster worker.
	if e, _ := fr[len(fr)-1].Error(); len(fr) != 2 || e.Code != e2a.ErrCodeDeadlineExceeded || !e.Retryable {
		t.Fatalf("running past the default deadline: want deadline_exceeded, retryable: %d frames, final %+v", len(fr), e)
	}
	if d := time.Since(start); d < 600*time.Millisecond || d > 5*time.Second {
		t.Errorf("deadline frame after %v, want ≈ 700ms", d)
	}
	if c := <-cause; !errors.Is(c, agent.ErrDeadlineExceeded) {
		t.Errorf("cause %v", c)
	}
	if err := <-lateWrite; !errors.Is(err, agent.ErrWriterClosed) {
		t.Errorf("write after the deadline: %v, want ErrWriterClosed", err)
	}
	// Running past the envelope's own deadline, earlier than the default
	// (of another pool: a minute).
	startWorker(t, s.connect(t), "dl2", h, agent.WithDefaultDeadline(time.Minute))
	waitConsumer(t, s.js, "dl2")
	own := request("dl-own", nil)
	own.Deadline = e2a.FormatTime(time.Now().Add(1500 * time.Millisecond))
	publish(t, s.js, "dl2", own)
	fr = waitFinal(t, s.nc, "dl-own", 10*time.Second)
	if e, _ := fr[len(fr)-1].Error(); len(fr) != 2 || e.Code != e2a.ErrCodeDeadlineExceeded || e.Retryable {
		t.Fatalf("running past its envelope deadline: want deadline_exceeded, not retryable: %d frames, final %+v", len(fr), e)
	}
	<-cause
	<-lateWrite
}

// TestForgedMaxDeliveriesAdvisoryIgnored: the max-deliveries advisory ends
// the request it names with a final e2a.error max_deliveries. The server
// sends it with no reply subject. A NATS user who may create consumers
// (the deployment's serve, ingress and workflow users may, of their own
// buckets) could have a server before 2.15.3 deliver its own bytes on the
// advisory subject (a push consumer whose deliver_subject it is), whatever
// its publish permissions: such a delivery (it has a reply subject) ended
// another principal's running request as failed. From 2.15.3 the server
// refuses a deliver subject under $JS.EVENT (checked here, so that a
// downgrade shows); the worker still ignores an advisory with a reply
// subject (a cluster may run an older server), and the request ends as its
// handler ends it. The forged delivery is published here as such a server
// delivered it: the user's bytes, with a reply subject.
func TestForgedMaxDeliveriesAdvisoryIgnored(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	started, release := make(chan struct{}), make(chan struct{})
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Chunk(e2a.DeltaText, "working"); err != nil {
			return err
		}
		close(started)
		<-release
		return w.Complete("finished")
	})
	logs := &testkit.Buffer{}
	startWorker(t, s.connect(t), "forged", h, agent.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	waitConsumer(t, s.js, "forged")
	publish(t, s.js, "forged", request("forged-1", nil))
	testkit.Receive(t, started, 10*time.Second, "the handler did not start")
	reqSubj, _ := subjects.Request("forged", "forged-1")
	req, err := streams.LastBySubject(tctx(t), s.nc, streams.RequestsStream, reqSubj)
	if err != nil {
		t.Fatal(err)
	}
	consumer, _ := streams.AgentConsumerName("forged")
	advisory := subjects.MaxDeliveriesAdvisory(streams.RequestsStream, consumer)
	if err := natstest.CreatePushConsumer(tctx(t), s.nc, streams.RequestsStream, "forger", reqSubj, advisory); err == nil {
		t.Fatalf("the server accepted a push consumer delivering to %s (nats-server before 2.15.3?)", advisory)
	}
	m := nats.NewMsg(advisory)
	m.Reply = nats.NewInbox()
	m.Data = fmt.Appendf(nil, `{"type":"io.nats.jetstream.advisory.v1.max_deliver","stream":%q,"consumer":%q,"stream_seq":%d,"deliveries":77}`,
		streams.RequestsStream, consumer, req.Seq)
	if err := s.nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the worker to ignore the forged advisory", func() bool {
		return strings.Contains(logs.String(), "advisory the server did not send")
	})
	close(release)
	fr := waitFinal(t, s.nc, "forged-1", 10*time.Second)
	if last := fr[len(fr)-1]; last.ResponseKind != e2a.KindComplete {
		t.Fatalf("the request ended %s %s; want its handler's e2a.complete (a forged advisory ended it)", last.ResponseKind, last.Body)
	}
}
