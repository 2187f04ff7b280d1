package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// rlRunServer starts an embedded JetStream server on a random loopback port
// with its store in a temporary directory.
func rlRunServer(t *testing.T) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// rlConnect opens a separate connection (a "replica") and returns its
// JetStream context.
func rlConnect(t *testing.T, s *server.Server, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// rlClock is a settable clock shared by the replicas of a test.
type rlClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *rlClock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *rlClock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func (c *rlClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// rlReplicas returns n limiters, each on its own NATS connection, sharing
// one bucket.
func rlReplicas(t *testing.T, s *server.Server, n int, cfg LimiterConfig, opts ...LimiterOption) []*Limiter {
	t.Helper()
	var out []*Limiter
	for i := 0; i < n; i++ {
		_, js := rlConnect(t, s)
		out = append(out, NewLimiter(rlBucket(t, js), cfg, opts...))
	}
	return out
}

// rlBucket is E2A_RATELIMIT through js, made when missing.
func rlBucket(t *testing.T, js jetstream.JetStream) jetstream.KeyValue {
	t.Helper()
	kv, err := EnsureRateLimitBucket(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// base is 10:00:30 UTC on some day: 30 s into a minute, 30 s into an hour.
var rlBase = time.Date(2026, 3, 28, 10, 0, 30, 0, time.UTC)

func TestRateLimitTwoReplicasShareAndRollOver(t *testing.T) {
	s := rlRunServer(t)
	clk := &rlClock{t: rlBase}
	reps := rlReplicas(t, s, 2, LimiterConfig{Limits: RateLimits{PerMinute: 5, PerHour: 8}}, WithLimiterClock(clk.now))
	ctx := context.Background()

	allowed := 0
	for i := 0; i < 10; i++ {
		d, err := reps[i%2].Allow(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if d.Degraded {
			t.Fatal("degraded with a healthy KV")
		}
		if d.Allowed {
			allowed++
			if d.Window != WindowMinute || d.Limit != 5 || d.Remaining != 5-allowed {
				t.Fatalf("request %d: %+v", i, d)
			}
		} else {
			if d.Window != WindowMinute || d.Remaining != 0 || d.RetryAfter != 30*time.Second || !d.Reset.Equal(rlBase.Add(30*time.Second)) {
				t.Fatalf("refusal %d: %+v", i, d)
			}
		}
	}
	if allowed != 5 {
		t.Fatalf("two replicas allowed %d, want 5", allowed)
	}
	// Another principal is independent.
	if d, _ := reps[1].Allow(ctx, "bob"); !d.Allowed {
		t.Fatal("bob refused")
	}

	// Next minute: the hour limit (8) binds after 3 more.
	clk.add(time.Minute)
	allowed = 0
	var last Decision
	for i := 0; i < 6; i++ {
		d, err := reps[(i+1)%2].Allow(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
		}
		last = d
	}
	if allowed != 3 {
		t.Fatalf("second minute allowed %d, want 3", allowed)
	}
	if last.Allowed || last.Window != WindowHour || last.Limit != 8 || last.RetryAfter != 58*time.Minute+30*time.Second {
		t.Fatalf("hour refusal: %+v", last)
	}
	// Status from either replica.
	st, err := reps[0].Status(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if st.Usage["requests_last_minute"] != 3 || st.Usage["requests_last_hour"] != 8 || st.Remaining["requests_per_hour"] != 0 ||
		st.Remaining["requests_per_minute"] != 2 || st.Limits["requests_per_minute"] != 5 || st.AgentID != "alice" || st.Degraded {
		t.Fatalf("status %+v", st)
	}
	if _, ok := st.Limits["requests_per_day"]; ok {
		t.Fatal("disabled day window listed")
	}
	// Next hour: allowed again, on both replicas.
	clk.add(time.Hour)
	for i := 0; i < 2; i++ {
		if d, err := reps[i].Allow(ctx, "alice"); err != nil || !d.Allowed {
			t.Fatalf("next hour: %+v %v", d, err)
		}
	}
}

func TestRateLimitConcurrentReplicasExact(t *testing.T) {
	s := rlRunServer(t)
	clk := &rlClock{t: rlBase}
	reps := rlReplicas(t, s, 2, LimiterConfig{Limits: RateLimits{PerMinute: 30, PerHour: 1000, PerDay: 10000}, OpTimeout: 5 * time.Second}, WithLimiterClock(clk.now),
		WithLimiterErrorHook(func(err error) { t.Errorf("limiter fell back: %v", err) }))
	var allowed, degraded atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				d, err := reps[g%2].Allow(context.Background(), "hot")
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					allowed.Add(1)
				}
				if d.Degraded {
					degraded.Add(1)
				}
			}
		}(g)
	}
	wg.Wait()
	if allowed.Load() != 30 || degraded.Load() != 0 {
		t.Fatalf("allowed %d (want 30), degraded %d", allowed.Load(), degraded.Load())
	}
	st, _ := reps[1].Status(context.Background(), "hot")
	if st.Usage["requests_last_minute"] != 30 || st.Usage["requests_last_day"] != 30 {
		t.Fatalf("status %+v", st)
	}
}

func TestRateLimitClockSkewAdoptsNewerWindow(t *testing.T) {
	s := rlRunServer(t)
	ahead := &rlClock{t: time.Date(2026, 3, 28, 10, 1, 0, 500e6, time.UTC)}
	behind := &rlClock{t: time.Date(2026, 3, 28, 10, 0, 59, 0, time.UTC)}
	cfg := LimiterConfig{Limits: RateLimits{PerMinute: 3}}
	a := rlReplicas(t, s, 1, cfg, WithLimiterClock(ahead.now))[0]
	b := rlReplicas(t, s, 1, cfg, WithLimiterClock(behind.now))[0]
	ctx := context.Background()
	// The lagging replica counts 2 in the 10:00 window...
	for i := 0; i < 2; i++ {
		if d, _ := b.Allow(ctx, "p"); !d.Allowed {
			t.Fatal("refused early")
		}
	}
	// ...the leading one opens 10:01...
	if d, _ := a.Allow(ctx, "p"); !d.Allowed || d.Remaining != 2 {
		t.Fatalf("new window: %+v", d)
	}
	// ...and the lagging one counts in 10:01 too instead of resetting it.
	for i := 0; i < 2; i++ {
		d, _ := b.Allow(ctx, "p")
		if !d.Allowed || !d.Reset.Equal(time.Date(2026, 3, 28, 10, 2, 0, 0, time.UTC)) {
			t.Fatalf("lagging replica not in the adopted window: %+v", d)
		}
	}
	if d, _ := a.Allow(ctx, "p"); d.Allowed {
		t.Fatal("window shared across skew was exceeded")
	}
	// Once over the limit, the lagging replica refuses from its own state
	// (conservative) until its clock reaches the next window.
	if d, _ := b.Allow(ctx, "p"); d.Allowed {
		t.Fatal("lagging replica allowed over the limit")
	}
}

func TestRateLimitFailOpenToLocalLimits(t *testing.T) {
	s := rlRunServer(t)
	clk := &rlClock{t: rlBase}
	var hookErrs atomic.Int64
	nc, js := rlConnect(t, s)
	kv := rlBucket(t, js)
	l := NewLimiter(kv, LimiterConfig{Limits: RateLimits{PerMinute: 4}}, WithLimiterClock(clk.now),
		WithLimiterErrorHook(func(err error) {
			if !errors.Is(err, ErrRateLimitUnavailable) {
				t.Errorf("hook error %v", err)
			}
			hookErrs.Add(1)
		}))
	ctx := context.Background()
	if d, _ := l.Allow(ctx, "p"); !d.Allowed || d.Degraded {
		t.Fatalf("healthy: %+v", d)
	}
	nc.Close() // the KV is now unreachable from this replica
	var ds []Decision
	for i := 0; i < 4; i++ {
		d, err := l.Allow(ctx, "p")
		if err != nil {
			t.Fatalf("fail-open returned %v", err)
		}
		ds = append(ds, d)
	}
	for i, d := range ds[:3] {
		if !d.Allowed || !d.Degraded || d.Remaining != 2-i {
			t.Fatalf("degraded %d: %+v", i, d)
		}
	}
	if ds[3].Allowed {
		t.Fatal("local limit not enforced while degraded")
	}
	if hookErrs.Load() != 1 {
		t.Fatalf("hook called %d times; the KV must be skipped after a failure", hookErrs.Load())
	}
	st, err := l.Status(ctx, "p")
	if err != nil || !st.Degraded || st.Usage["requests_last_minute"] != 4 {
		t.Fatalf("degraded status %+v %v", st, err)
	}
	// After RetryAfterFailure the KV is tried again (still down: one more hook call).
	clk.add(2 * time.Second)
	if d, _ := l.Allow(ctx, "q"); !d.Allowed || !d.Degraded {
		t.Fatalf("retry: %+v", d)
	}
	if hookErrs.Load() != 2 {
		t.Fatalf("hook called %d times", hookErrs.Load())
	}

	// A new connection: the shared count (1) is back in charge, local counts
	// are dropped.
	_, js2 := rlConnect(t, s)
	kv2, _ := js2.KeyValue(ctx, RateLimitBucket)
	l.kv = kv2
	clk.add(2 * time.Second)
	d, err := l.Allow(ctx, "q")
	if err != nil || !d.Allowed || d.Degraded || d.Remaining != 3 {
		t.Fatalf("recovered: %+v %v", d, err)
	}
}

func TestRateLimitFailOpenOnServerTimeout(t *testing.T) {
	s := rlRunServer(t)
	_, js := rlConnect(t, s, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	kv := rlBucket(t, js)
	l := NewLimiter(kv, LimiterConfig{Limits: DefaultRateLimits(), OpTimeout: 100 * time.Millisecond})
	if d, _ := l.Allow(context.Background(), "p"); !d.Allowed || d.Degraded {
		t.Fatalf("healthy: %+v", d)
	}
	s.Shutdown()
	s.WaitForShutdown()
	start := time.Now()
	d, err := l.Allow(context.Background(), "p")
	if err != nil || !d.Allowed || !d.Degraded {
		t.Fatalf("server down: %+v %v", d, err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("Allow blocked %v with the server down", el)
	}
	// Skipped now (RetryAfterFailure): the next decision is the fallback's
	// without a KV operation to wait for. (It was timed, within 50 ms: a
	// loaded machine may deschedule a goroutine that long.)
	if !l.kvSkipped(time.Now()) {
		t.Fatal("the KV is not skipped after it failed")
	}
	if d, _ := l.Allow(context.Background(), "p"); !d.Degraded {
		t.Fatalf("not skipped: %+v", d)
	}
}

func TestRateLimitFailClosed(t *testing.T) {
	s := rlRunServer(t)
	clk := &rlClock{t: rlBase}
	nc, js := rlConnect(t, s)
	kv := rlBucket(t, js)
	l := NewLimiter(kv, LimiterConfig{Limits: DefaultRateLimits(), FailClosed: true}, WithLimiterClock(clk.now))
	ctx := context.Background()
	if d, err := l.Allow(ctx, "p"); err != nil || !d.Allowed {
		t.Fatalf("healthy: %+v %v", d, err)
	}
	nc.Close()
	for i := 0; i < 2; i++ { // the failure, then the skip
		d, err := l.Allow(ctx, "p")
		if !errors.Is(err, ErrRateLimitUnavailable) || d.Allowed {
			t.Fatalf("fail-closed %d: %+v %v", i, d, err)
		}
	}
	if _, err := l.Status(ctx, "p"); !errors.Is(err, ErrRateLimitUnavailable) {
		t.Fatalf("status: %v", err)
	}
	// A cancelled request context is not a KV failure.
	_, js2 := rlConnect(t, s)
	kv2, _ := js2.KeyValue(ctx, RateLimitBucket)
	l2 := NewLimiter(kv2, LimiterConfig{Limits: DefaultRateLimits(), FailClosed: true}, WithLimiterClock(clk.now))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l2.Allow(cctx, "p"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if d, err := l2.Allow(ctx, "p"); err != nil || !d.Allowed {
		t.Fatalf("after cancel: %+v %v", d, err)
	}
}

func TestRateLimitKeysOverridesDisabled(t *testing.T) {
	s := rlRunServer(t)
	clk := &rlClock{t: rlBase}
	l := rlReplicas(t, s, 1, LimiterConfig{
		Limits:    RateLimits{PerMinute: 1},
		Overrides: map[string]RateLimits{"vip": {PerMinute: 3}, "free": {}},
	}, WithLimiterClock(clk.now))[0]
	ctx := context.Background()
	for _, p := range []string{"a.b", "*", ">", "x y", "ünï", "", strings.Repeat("z", 10_000), "alice@example.com"} {
		if d, err := l.Allow(ctx, p); err != nil || !d.Allowed || d.Degraded {
			t.Fatalf("%.20q: %+v %v", p, d, err)
		}
		if d, _ := l.Allow(ctx, p); d.Allowed {
			t.Fatalf("%.20q: second request allowed", p)
		}
	}
	if rateLimitKey("a.b") == rateLimitKey("a_b") || rateLimitKey("") != rateLimitKey("anonymous") {
		t.Fatal("key encoding")
	}
	for i := 0; i < 3; i++ {
		if d, _ := l.Allow(ctx, "vip"); !d.Allowed {
			t.Fatal("override not applied")
		}
	}
	for i := 0; i < 100; i++ {
		if d, _ := l.Allow(ctx, "free"); !d.Allowed || d.Window != "" {
			t.Fatal("disabled limits refused")
		}
	}
	h := httptest.NewRecorder().Header()
	d, _ := l.Allow(ctx, "free")
	d.SetHeaders(h)
	if len(h) != 0 {
		t.Fatalf("headers without limits: %v", h)
	}
	keys, err := l.kv.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 8+1 { // 8 principals + vip
		t.Fatalf("keys %v", keys)
	}
}

func TestRateLimitHTTPAnswer(t *testing.T) {
	now := time.Unix(1702847985, 0) // 15 s before 1702848000
	d, _ := decide(rlState{{floorDiv(now.Unix(), 60), 60}}, now, RateLimits{PerMinute: 60, PerHour: 1000}, 1)
	if d.Allowed {
		t.Fatal("allowed")
	}
	rec := httptest.NewRecorder()
	WriteRateLimited(rec, d)
	if rec.Code != 429 {
		t.Fatal(rec.Code)
	}
	h := rec.Header()
	if h.Get("X-RateLimit-Limit") != "60" || h.Get("X-RateLimit-Remaining") != "0" || h.Get("X-RateLimit-Reset") != "1702848000" || h.Get("Retry-After") != "15" {
		t.Fatalf("headers %v", h)
	}
	if got := strings.TrimSpace(rec.Body.String()); got != `{"error":"Rate limit exceeded","message":"Rate limit exceeded: 60 requests per minute","retry_after":15,"retryable":true}` {
		t.Fatalf("body %s", got)
	}
	e := d.RPCError()
	b, _ := json.Marshal(jsonrpc.ErrorResponse(json.RawMessage(`1`), e))
	if !strings.Contains(string(b), `"code":-32029`) || !strings.Contains(string(b), `"retry_after":15`) {
		t.Fatalf("rpc %s", b)
	}
	// Allowed: the window with the fewest remaining.
	d, _ = decide(rlState{{floorDiv(now.Unix(), 60), 10}, {floorDiv(now.Unix(), 3600), 995}}, now, RateLimits{PerMinute: 60, PerHour: 1000}, 1)
	if !d.Allowed || d.Window != WindowHour || d.Remaining != 4 {
		t.Fatalf("binding %+v", d)
	}
	h = httptest.NewRecorder().Header()
	d.SetHeaders(h)
	if h.Get("Retry-After") != "" || h.Get("X-RateLimit-Remaining") != "4" {
		t.Fatalf("allowed headers %v", h)
	}
	// Several windows exceeded: the latest reset wins.
	d, _ = decide(rlState{{floorDiv(now.Unix(), 60), 60}, {floorDiv(now.Unix(), 3600), 1000}}, now, RateLimits{PerMinute: 60, PerHour: 1000}, 1)
	if d.Window != WindowHour {
		t.Fatalf("worst window %+v", d)
	}
}

func TestRateLimitBucketProvisioning(t *testing.T) {
	s := rlRunServer(t)
	_, js := rlConnect(t, s)
	ctx := context.Background()
	kv := rlBucket(t, js)
	st, _ := kv.Status(ctx)
	if st.TTL() != RateLimitBucketTTL || st.History() != 1 {
		t.Fatalf("bucket %v %d", st.TTL(), st.History())
	}
	if _, err := EnsureRateLimitBucket(ctx, js); err != nil {
		t.Fatalf("second ensure: %v", err)
	}
	// A bucket provisioned elsewhere with a TTL too short for the day window.
	if err := js.DeleteKeyValue(ctx, RateLimitBucket); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: RateLimitBucket, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureRateLimitBucket(ctx, js); !errors.Is(err, ErrRateLimitBucket) {
		t.Fatalf("short TTL: %v", err)
	}
}

func TestRateLimitLocalOnly(t *testing.T) {
	clk := &rlClock{t: rlBase}
	l := NewLimiter(nil, LimiterConfig{Limits: RateLimits{PerMinute: 2}}, WithLimiterClock(clk.now))
	ctx := context.Background()
	for i, want := range []bool{true, true, false} {
		d, err := l.Allow(ctx, "p")
		if err != nil || d.Allowed != want || d.Degraded {
			t.Fatalf("%d: %+v %v", i, d, err)
		}
	}
	st, err := l.Status(ctx, "p")
	if err != nil || st.Usage["requests_last_minute"] != 2 || st.Degraded {
		t.Fatalf("status %+v %v", st, err)
	}
	clk.add(time.Minute)
	if d, _ := l.Allow(ctx, "p"); !d.Allowed {
		t.Fatal("no rollover")
	}
}

// On the project's test server, whose E2A_RATELIMIT bucket was provisioned
// by streams.Apply, two replicas (separate connections) share the limit.
func TestRateLimitOnStreamsProvisionedBucket(t *testing.T) {
	srv, nc := natstest.RunServer(t)
	nc2, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	clk := &rlClock{t: rlBase}
	ctx := context.Background()
	var reps []*Limiter
	for _, c := range []*nats.Conn{nc, nc2} {
		kv, err := EnsureRateLimitBucket(ctx, natstest.JetStream(t, c))
		if err != nil && !errors.Is(err, ErrRateLimitBucket) {
			t.Fatal(err)
		}
		if err != nil {
			t.Logf("streams-provisioned bucket: %v", err)
		}
		reps = append(reps, NewLimiter(kv, LimiterConfig{Limits: RateLimits{PerMinute: 3}}, WithLimiterClock(clk.now)))
	}
	allowed := 0
	for i := 0; i < 8; i++ {
		d, err := reps[i%2].Allow(ctx, "alice")
		if err != nil || d.Degraded {
			t.Fatalf("%+v %v", d, err)
		}
		if d.Allowed {
			allowed++
		}
	}
	if allowed != 3 {
		t.Fatalf("allowed %d, want 3", allowed)
	}
}
