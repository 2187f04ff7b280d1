package agent_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Point 6: a panic, an error, an *agent.Error each become a final e2a.error
// frame; a handler returning nil without a final frame gets e2a.complete;
// the same single-slot worker keeps serving after each.
func TestHandlerFailuresBecomeFinalFrames(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if err := w.Chunk(e2a.DeltaText, "x"); err != nil {
			return err
		}
		switch env.ParamString("do") {
		case "panic":
			var m map[string]int
			m["boom"]++ // nil map: a real runtime panic
		case "error":
			return errors.New("backend unavailable")
		case "agent-error":
			return &agent.Error{Code: "quota_exceeded", Message: "try later", Retryable: true}
		case "fail":
			return w.Fail("bad_input", "no", false)
		case "bad-write":
			if err := w.Write(e2a.KindError, e2a.StatusSucceeded, map[string]any{}, true); err == nil {
				return errors.New("an invalid frame was accepted")
			}
			return w.Write(e2a.KindExt, e2a.StatusSucceeded, e2a.ExtBody{ExtMethod: "x.done"}, true)
		}
		return nil
	})
	reg := prometheus.NewRegistry()
	startWorker(t, s.connect(t), "fail", h, agent.WithConcurrency(1), agent.WithMetrics(reg))
	waitConsumer(t, s.js, "fail")
	cases := []struct {
		do, kind, code string
		retryable      bool
	}{
		{"panic", e2a.KindError, e2a.ErrCodeHandlerPanic, false},
		{"error", e2a.KindError, e2a.ErrCodeHandlerError, false},
		{"agent-error", e2a.KindError, "quota_exceeded", true},
		{"fail", e2a.KindError, "bad_input", false},
		{"nil", e2a.KindComplete, "", false},
		{"bad-write", e2a.KindExt, "", false},
	}
	for _, c := range cases {
		publish(t, s.js, "fail", request("fail-"+c.do, map[string]any{"do": c.do}))
	}
	for _, c := range cases {
		fr := waitFinal(t, s.nc, "fail-"+c.do, 10*time.Second)
		last := fr[len(fr)-1]
		if len(fr) != 2 || last.ResponseKind != c.kind {
			t.Errorf("%s: %d frames, final %s", c.do, len(fr), last.ResponseKind)
			continue
		}
		if c.kind == e2a.KindError {
			e, _ := last.Error()
			if e.Code != c.code || e.Retryable != c.retryable || last.Status != e2a.StatusFailed {
				t.Errorf("%s: final %+v", c.do, e)
			}
			if c.do == "panic" && strings.Contains(e.Message, "nil map") {
				t.Errorf("panic detail leaked to the client: %q", e.Message)
			}
		}
	}
	waitMetric(t, reg, "e2a_agent_requests_handled_total", map[string]string{"outcome": agent.OutcomePanic}, 1)
	waitMetric(t, reg, "e2a_agent_requests_handled_total", map[string]string{"outcome": agent.OutcomeFailed}, 3)
	waitMetric(t, reg, "e2a_agent_requests_handled_total", map[string]string{"outcome": agent.OutcomeSucceeded}, 2)
}

// A handler's *Error whose Details do not encode as JSON (NaN) still ends
// the request, at its first delivery, with the handler's code, message and
// retryable, without the details: a final frame refused before publishing
// would be refused again at every redelivery.
func TestHandlerErrorDetailsNotJSON(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var calls atomic.Int32
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		calls.Add(1)
		return &agent.Error{Code: "scoring_failed", Message: "bad score", Retryable: true,
			Details: map[string]any{"score": math.NaN()}}
	})
	startWorker(t, s.connect(t), "nan", h, agent.WithMaxDeliver(3), agent.WithAckWait(time.Second),
		agent.WithLogger(slog.New(slog.DiscardHandler)))
	waitConsumer(t, s.js, "nan")
	publish(t, s.js, "nan", request("nan-1", nil))
	fr := waitFinal(t, s.nc, "nan-1", 10*time.Second)
	e, err := fr[len(fr)-1].Error()
	if err != nil || len(fr) != 1 || e.Code != "scoring_failed" || e.Message != "bad score" || !e.Retryable || len(e.Details) != 0 {
		t.Fatalf("%d frames, final %+v (%v); want the handler's error without its details", len(fr), e, err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler called %d times, want once", n)
	}
}

// A handler whose goroutine ends by runtime.Goexit (t.FailNow, or a library
// calling it) neither returns nor panics: its request still ends with a
// final e2a.error handler_panic after its frames, and the worker keeps
// serving.
func TestHandlerGoexitBecomesFinalFrame(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var logs testkit.Buffer
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		if env.RequestID == "goexit-2" {
			return w.Complete("served")
		}
		if err := w.Chunk(e2a.DeltaText, "about to exit"); err != nil {
			return err
		}
		runtime.Goexit()
		return nil
	})
	startWorker(t, s.connect(t), "goexit", h, agent.WithConcurrency(1), agent.WithDrainTimeout(time.Second),
		agent.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	waitConsumer(t, s.js, "goexit")
	publish(t, s.js, "goexit", request("goexit-1", nil))
	fr := waitFinal(t, s.nc, "goexit-1", 5*time.Second)
	e, _ := fr[len(fr)-1].Error()
	if len(fr) != 2 || e.Code != e2a.ErrCodeHandlerPanic || e.Retryable {
		t.Fatalf("%d frames, final %+v; want the chunk then e2a.error handler_panic", len(fr), e)
	}
	if !strings.Contains(logs.String(), "runtime.Goexit") {
		t.Errorf("the handler's exit is not logged:\n%s", logs.String())
	}
	publish(t, s.js, "goexit", request("goexit-2", nil))
	if fr := waitFinal(t, s.nc, "goexit-2", 5*time.Second); fr[len(fr)-1].ResponseKind != e2a.KindComplete {
		t.Fatalf("next request: final %s", fr[len(fr)-1].ResponseKind)
	}
}

// Point 7: on shutdown a request that finishes within the drain timeout
// finishes, and Run returns after it.
func TestShutdownDrainsInFlight(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	started := make(chan struct{})
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		close(started)
		time.Sleep(400 * time.Millisecond) // the behaviour: a turn still running when shutdown begins
		return w.Complete("finished")
	})
	w := startWorker(t, s.connect(t), "drain", h, agent.WithDrainTimeout(5*time.Second))
	waitConsumer(t, s.js, "drain")
	publish(t, s.js, "drain", request("drain-1", nil))
	<-started
	if err := w.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	fr, _ := storedFrames(t, s.nc, "drain-1")
	if len(fr) != 1 || fr[0].ResponseKind != e2a.KindComplete {
		t.Fatalf("after Run returned: %d frames", len(fr))
	}
}

// Point 7: a request still running at the drain timeout is handed back
// (Nak): its handler's context is cancelled with ErrShutdown, Run returns
// promptly, and another worker takes it over at once (long before AckWait)
// and resumes it.
func TestShutdownHandsBack(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	cause := make(chan error, 1)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		// The request is still running at the drain timeout whatever the
		// machine's pace: after two frames the writer holds until the
		// handler's context ends. A handler that returns without its
		// context cancelled reports a nil cause and the test fails.
		err := demo.New().Serve(ctx, env, &heldWriter{Writer: w, ctx: ctx, free: 2})
		cause <- context.Cause(ctx)
		return err
	})
	reg := prometheus.NewRegistry()
	w := startWorker(t, s.connect(t), "handback", h, agent.WithDrainTimeout(300*time.Millisecond),
		agent.WithAckWait(30*time.Second), agent.WithMetrics(reg))
	waitConsumer(t, s.js, "handback")
	env := request("handback-1", map[string]any{"text": "hand me back", "frames": 8})
	publish(t, s.js, "handback", env)
	waitFrames(t, s, env.RequestID, 2)
	start := time.Now()
	if err := w.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Run took %v to return with a 300ms drain timeout", d)
	}
	if c := <-cause; !errors.Is(c, agent.ErrShutdown) {
		t.Errorf("cause %v, want ErrShutdown", c)
	}
	if n := metricValue(t, reg, "e2a_agent_requests_handled_total", map[string]string{"outcome": agent.OutcomeHandedBack}); n != 1 {
		t.Errorf("handed back %v, want 1", n)
	}
	partial, _ := storedFrames(t, s.nc, env.RequestID)
	taken := time.Now()
	startWorker(t, s.connect(t), "handback", demo.New(), agent.WithAckWait(30*time.Second))
	fr := waitFinal(t, s.nc, env.RequestID, 10*time.Second)
	if d := time.Since(taken); d > 5*time.Second {
		t.Errorf("taken over after %v: not handed back", d)
	}
	c, _ := fr[len(fr)-1].Complete()
	if len(fr) != 3+8+1 || c.Result.(map[string]any)["content"] != text(t, fr) {
		t.Fatalf("%d frames (partial %d), content %v vs %q", len(fr), len(partial), c.Result, text(t, fr))
	}
}

// A stopped worker pulls no more requests: the pull in flight when ctx is
// cancelled is the last. Each round cancels right after the worker's pull
// request shows on the consumer's next-message subject (the pull waits the
// fetch wait, so the cancel lands while it is in flight) and counts the
// pulls that follow. A loop that lets a free slot win over the done ctx
// pulls again in half the rounds and holds the stop for another fetch wait
// each time.
func TestStopPullsNoMore(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	name, _ := streams.AgentConsumerName("nomore")
	pulls, err := s.nc.SubscribeSync(subjects.ConsumerNext(streams.RequestsStream, name))
	if err != nil {
		t.Fatal(err)
	}
	for round := range 6 {
		nc := s.connect(t)
		w := startWorker(t, nc, "nomore", demo.New(), agent.WithFetchWait(time.Second))
		if _, err := pulls.NextMsg(10 * time.Second); err != nil {
			t.Fatalf("round %d: no pull: %v", round, err)
		}
		w.cancel()
		if err := w.stop(); err != nil {
			t.Fatalf("round %d: Run: %v", round, err)
		}
		// Whatever the worker published has reached the subscription.
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := s.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if n, _, _ := pulls.Pending(); n != 0 {
			t.Fatalf("round %d: %d pulls after the stop", round, n)
		}
	}
}

// TestStopEndsThePull: a worker stopped while its pull waits for requests
// returns at once, not when the pull expires: every stop waited for it
// (the fetch wait, 1 s by default; an hour here), and so did the end of
// every test that ran a worker.
func TestStopEndsThePull(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	name, _ := streams.AgentConsumerName("stopnow")
	pulls, err := s.nc.SubscribeSync(subjects.ConsumerNext(streams.RequestsStream, name))
	if err != nil {
		t.Fatal(err)
	}
	w := startWorker(t, s.connect(t), "stopnow", demo.New(), agent.WithFetchWait(time.Hour))
	if _, err := pulls.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("no pull: %v", err)
	}
	w.cancel()
	select {
	case err := <-w.done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run still waits for its pull 10 s after the stop")
	}
}

// heldWriter lets free frames through, then holds every further write until
// ctx ends and returns its error.
type heldWriter struct {
	agent.Writer
	ctx  context.Context
	free int
}

func (h *heldWriter) Write(kind, status string, body any, final bool) error {
	if h.free == 0 {
		<-h.ctx.Done()
		return h.ctx.Err()
	}
	h.free--
	return h.Writer.Write(kind, status, body, final)
}

// Point 8: the worker's metrics, on the registerer given.
func TestMetricsRegistered(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	reg := prometheus.NewRegistry()
	release := make(chan struct{})
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return demo.New().Serve(ctx, env, w)
	})
	startWorker(t, s.connect(t), "metrics", h, agent.WithMetrics(reg))
	// A second worker sharing the registry reuses the collectors.
	startWorker(t, s.connect(t), "metrics2", demo.New(), agent.WithMetrics(reg))
	waitConsumer(t, s.js, "metrics")
	waitConsumer(t, s.js, "metrics2")
	publish(t, s.js, "metrics", request("m-1", map[string]any{"frames": 2}))
	waitMetric(t, reg, "e2a_agent_in_flight", map[string]string{"pool": "metrics"}, 1)
	close(release)
	publish(t, s.js, "metrics2", request("m-2", map[string]any{"frames": 2}))
	waitFinal(t, s.nc, "m-1", 10*time.Second)
	waitFinal(t, s.nc, "m-2", 10*time.Second)
	for _, pool := range []string{"metrics", "metrics2"} {
		p := map[string]string{"pool": pool}
		waitMetric(t, reg, "e2a_agent_requests_handled_total", map[string]string{"pool": pool, "outcome": "succeeded"}, 1)
		waitMetric(t, reg, "e2a_agent_in_flight", p, 0)
		if n := metricValue(t, reg, "e2a_agent_frames_published_total", p); n != 6 {
			t.Errorf("%s: frames published %v, want 6", pool, n)
		}
		// The duration is observed just after the outcome is counted: wait for it too.
		waitMetric(t, reg, "e2a_agent_handler_duration_seconds", p, 1)
	}
	mfs, _ := reg.Gather()
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{"e2a_agent_in_flight", "e2a_agent_requests_handled_total", "e2a_agent_frames_published_total",
		"e2a_agent_handler_duration_seconds", "e2a_agent_redeliveries_total"} {
		if !names[n] {
			t.Errorf("metric %s missing", n)
		}
	}
}

// Options validate their arguments; CheckOptions refuses what Run
// refuses.
func TestOptionsValidate(t *testing.T) {
	s := startServer(t)
	h := demo.New()
	bad := map[string][]agent.Option{
		"concurrency 0":       {agent.WithConcurrency(0)},
		"max ack pending 0":   {agent.WithMaxAckPending(0)},
		"ack wait 10ms":       {agent.WithAckWait(10 * time.Millisecond)},
		"heartbeat ≥ ackwait": {agent.WithAckWait(time.Second), agent.WithHeartbeat(2 * time.Second)},
		"max deliver 0":       {agent.WithMaxDeliver(0)},
		"back-off steps":      {agent.WithMaxDeliver(2), agent.WithBackOff(time.Second, 2*time.Second, 3*time.Second)},
		"coalesce negative":   {agent.WithCoalesce(-1, 0)},
		"coalesce delay 2s":   {agent.WithCoalesce(10, 2*time.Second)},
		"drain negative":      {agent.WithDrainTimeout(-time.Second)},
		"nil logger":          {agent.WithLogger(nil)},
		"nil registerer":      {agent.WithMetrics(nil)},
		"deadline negative":   {agent.WithDefaultDeadline(-time.Second)},
		"publish timeout 1ms": {agent.WithPublishTimeout(time.Millisecond)},
		"nil option":          {agent.WithConcurrency(2), nil},
	}
	for name, opts := range bad {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := agent.Run(ctx, s.nc, "opts", h, opts...)
		cancel()
		if !errors.Is(err, agent.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
		if err := agent.CheckOptions(opts...); !errors.Is(err, agent.ErrInvalidOption) {
			t.Errorf("CheckOptions, %s: %v, want ErrInvalidOption", name, err)
		}
	}
	if err := agent.CheckOptions(agent.WithConcurrency(2), agent.WithAckWait(time.Second)); err != nil {
		t.Errorf("CheckOptions of good options: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := agent.Run(ctx, s.nc, "bad.pool", h); err == nil {
		t.Error("invalid pool name accepted")
	}
}
