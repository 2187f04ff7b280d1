package bridge

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// recWriter is an agent.Writer that records what is written (the runtime's
// own writer is tested in package agent; here only the count matters).
type recWriter struct {
	mu     sync.Mutex
	frames []string
}

var _ agent.Writer = (*recWriter)(nil)

func (w *recWriter) add(kind string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.frames = append(w.frames, kind)
	return nil
}
func (w *recWriter) Chunk(string, any) error                   { return w.add(e2a.KindChunk) }
func (w *recWriter) Complete(any) error                        { return w.add(e2a.KindComplete) }
func (w *recWriter) Fail(string, string, bool) error           { return w.add(e2a.KindError) }
func (w *recWriter) Write(kind, _ string, _ any, _ bool) error { return w.add(kind) }
func (w *recWriter) SetMetadata(map[string]any) error          { return nil }
func (w *recWriter) ResumeAfter() int64                        { return -1 }
func (w *recWriter) Sync() error                               { return nil }

// scripted is an Upstream whose calls return errs in turn (nil: it
// completes), writing a chunk first when chunkFirst.
type scripted struct {
	errs       []error
	chunkFirst bool
	calls      atomic.Int32
	block      chan struct{} // when set, a call waits for it
	started    chan struct{} // when set, a call sends on it first
	running    atomic.Int32
	maxRunning atomic.Int32
}

func (s *scripted) Name() string { return "test http://upstream" }

func (s *scripted) Call(ctx context.Context, _ *e2a.Envelope, w agent.Writer) error {
	n := int(s.calls.Add(1)) - 1
	r := s.running.Add(1)
	defer s.running.Add(-1)
	for {
		m := s.maxRunning.Load()
		if r <= m || s.maxRunning.CompareAndSwap(m, r) {
			break
		}
	}
	if s.started != nil {
		// Counted as running before it says so: a test that saw n
		// starts knows n calls run (they end only when block is closed).
		s.started <- struct{}{}
	}
	if s.block != nil {
		select {
		case <-s.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.chunkFirst {
		_ = w.Chunk(e2a.DeltaText, "x")
	}
	if n < len(s.errs) && s.errs[n] != nil {
		return s.errs[n]
	}
	return w.Complete("done")
}

// newTestHandler is New with its sleeps recorded instead of waited.
func newTestHandler(t *testing.T, up Upstream, opts ...Option) (*Handler, *[]time.Duration) {
	t.Helper()
	h, err := New("p", up, append([]Option{WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	h.cfg.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	return h, &waits
}

// TestOptions: every option refuses bad values with ErrInvalidOption.
func TestOptions(t *testing.T) {
	up := &scripted{}
	for name, o := range map[string]Option{
		"in flight 0":       WithMaxInFlight(0),
		"retries < 0":       WithRetry(-1, time.Second, time.Second),
		"retries > 20":      WithRetry(21, time.Second, time.Second),
		"base 0":            WithRetry(1, 0, time.Second),
		"max < base":        WithRetry(1, time.Second, time.Millisecond),
		"nil registerer":    WithMetrics(nil),
		"nil logger":        WithLogger(nil),
		"pool and upstream": nil,
	} {
		var err error
		if o == nil {
			_, err = New("", up)
		} else {
			_, err = New("p", up, o)
		}
		if !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := New("p", nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("nil upstream: %v", err)
	}
	if _, err := New("p", up, WithMaxInFlight(2), nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("nil option: %v", err)
	}
}

// TestBackoffBounds: the wait before retry attempt+1 is at most
// base·2^attempt and the cap, at least the upstream's Retry-After (bounded
// by the cap too), for every attempt (no overflow at 20 and beyond).
func TestBackoffBounds(t *testing.T) {
	h, _ := newTestHandler(t, &scripted{}, WithRetry(20, 10*time.Millisecond, 2*time.Second))
	for attempt := range 64 {
		ceil := min(10*time.Millisecond<<min(attempt, 20), 2*time.Second)
		for range 50 {
			if d := h.backoff(attempt, 0); d < 0 || d > ceil {
				t.Fatalf("attempt %d: %v outside 0..%v", attempt, d, ceil)
			}
			if d := h.backoff(attempt, 1500*time.Millisecond); d < 1500*time.Millisecond || d > 2*time.Second {
				t.Fatalf("attempt %d with Retry-After 1.5s: %v", attempt, d)
			}
			if d := h.backoff(attempt, time.Hour); d != 2*time.Second {
				t.Fatalf("attempt %d with Retry-After 1h: %v, want the cap", attempt, d)
			}
		}
	}
}

// TestRetryOnlyBeforeFirstFrame: a retryable failure before any frame is
// retried (up to the retries, with Retry-After honoured); after a frame,
// or a failure that is not retryable, never.
func TestRetryOnlyBeforeFirstFrame(t *testing.T) {
	unavailable := Errorf(CodeUnavailable, true, "503")
	limited := &Error{Code: CodeRateLimited, Retryable: true, Message: "429", RetryAfter: 3 * time.Second}
	env := &e2a.Envelope{RequestID: "r"}
	for _, c := range []struct {
		name       string
		up         *scripted
		calls      int32
		code       string // the handler's *agent.Error code ("" for nil)
		minWaitOne time.Duration
	}{
		{"503 then ok", &scripted{errs: []error{unavailable}}, 2, "", 0},
		{"429 honours Retry-After", &scripted{errs: []error{limited}}, 2, "", 3 * time.Second},
		{"always 503", &scripted{errs: []error{unavailable, unavailable, unavailable, unavailable, unavailable}}, 4, CodeUnavailable, 0},
		{"not retryable", &scripted{errs: []error{Errorf(CodeRejected, false, "400")}}, 1, CodeRejected, 0},
		{"after a frame", &scripted{errs: []error{unavailable}, chunkFirst: true}, 1, CodeUnavailable, 0},
		{"a transport error is classified", &scripted{errs: []error{ErrIdleTimeout}}, 2, "", 0},
	} {
		h, waits := newTestHandler(t, c.up, WithRetry(3, 10*time.Millisecond, 5*time.Second), WithMetrics(prometheus.NewRegistry()))
		err := h.Serve(context.Background(), env, &recWriter{})
		var ae *agent.Error
		switch {
		case c.code == "" && err != nil, c.code != "" && (!errors.As(err, &ae) || ae.Code != c.code):
			t.Errorf("%s: %v, want %q", c.name, err, c.code)
		}
		if got := c.up.calls.Load(); got != c.calls {
			t.Errorf("%s: %d calls, want %d", c.name, got, c.calls)
		}
		if len(*waits) != int(c.calls)-1 {
			t.Errorf("%s: waits %v", c.name, *waits)
		}
		if c.minWaitOne > 0 && (len(*waits) == 0 || (*waits)[0] < c.minWaitOne) {
			t.Errorf("%s: waits %v, want the first ≥ %v", c.name, *waits, c.minWaitOne)
		}
	}
}

// TestServeMetrics: calls by outcome and retries are counted per pool and
// upstream.
func TestServeMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	up := &scripted{errs: []error{Errorf(CodeUnavailable, true, "503")}}
	h, _ := newTestHandler(t, up, WithMetrics(reg))
	if err := h.Serve(context.Background(), &e2a.Envelope{RequestID: "r"}, &recWriter{}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(h.m.calls.WithLabelValues("p", up.Name(), "ok")); got != 1 {
		t.Errorf("ok calls %v", got)
	}
	if got := testutil.ToFloat64(h.m.retries.WithLabelValues("p", up.Name())); got != 1 {
		t.Errorf("retries %v", got)
	}
	// A second bridge in the process shares the collectors.
	if _, err := New("q", up, WithMetrics(reg)); err != nil {
		t.Fatalf("second bridge on the same registry: %v", err)
	}
}

// failing is an upstream that answers with its own failure: w.Fail, or
// an e2a.error final frame written whole (write).
type failing struct{ write bool }

func (failing) Name() string { return "test http://failing" }

func (f failing) Call(_ context.Context, _ *e2a.Envelope, w agent.Writer) error {
	if f.write {
		return w.Write(e2a.KindError, e2a.StatusFailed, e2a.ErrorBody{Code: "tool_failed", Message: "no weather"}, true)
	}
	return w.Fail("tool_failed", "no weather", false)
}

// TestServeMetricsAgentFailed: a call the upstream answered with its own
// failure (an HTTP agent's e2a.error frame, an A2A agent's failed task)
// is counted agent_failed; it was ok, so a dashboard of the calls showed
// an agent failing every request as healthy.
func TestServeMetricsAgentFailed(t *testing.T) {
	for _, write := range []bool{false, true} {
		up := failing{write: write}
		h, _ := newTestHandler(t, up, WithMetrics(prometheus.NewRegistry()))
		if err := h.Serve(context.Background(), &e2a.Envelope{RequestID: "r"}, &recWriter{}); err != nil {
			t.Fatal(err)
		}
		for oc, want := range map[string]float64{"agent_failed": 1, "ok": 0} {
			if got := testutil.ToFloat64(h.m.calls.WithLabelValues("p", up.Name(), oc)); got != want {
				t.Errorf("written whole %v: %s calls %v, want %v", write, oc, got, want)
			}
		}
	}
}

// TestMaxInFlight: at most n calls run at once; a request waiting for a
// slot gives up when its context is done.
func TestMaxInFlight(t *testing.T) {
	up := &scripted{block: make(chan struct{}), started: make(chan struct{}, 5)}
	h, _ := newTestHandler(t, up, WithMaxInFlight(2), WithMetrics(prometheus.NewRegistry()))
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = h.Serve(context.Background(), &e2a.Envelope{RequestID: "r"}, &recWriter{})
		}()
	}
	// Two calls start; the others wait for a slot.
	<-up.started
	<-up.started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.Serve(ctx, &e2a.Envelope{RequestID: "late"}, &recWriter{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled while waiting for a slot: %v", err)
	}
	close(up.block)
	wg.Wait()
	if up.calls.Load() != 5 || up.maxRunning.Load() != 2 {
		t.Fatalf("%d calls, at most %d at once", up.calls.Load(), up.maxRunning.Load())
	}
}
