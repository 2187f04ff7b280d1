package ingress

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The budget of request bytes (RateLimits.BytesPer…): charged after the
// publish (ChargeBytes), refused at the next admission, shared by the
// replicas through the same key as the request counts.

// TestRateLimitBytesTwoReplicas: 1,000 bytes a minute, 2,500 an hour, on
// two replicas sharing the bucket. The request that crosses the budget is
// admitted (its size was not known); the next is refused on either
// replica, including the one whose state did not hold the bytes yet: the
// refusing replica writes the bytes charged there before it answers.
func TestRateLimitBytesTwoReplicas(t *testing.T) {
	s := rlRunServer(t)
	clk := &rlClock{t: rlBase}
	reps := rlReplicas(t, s, 2, LimiterConfig{Limits: RateLimits{PerMinute: 100, BytesPerMinute: 1000, BytesPerHour: 2500}},
		WithLimiterClock(clk.now), WithLimiterErrorHook(func(err error) { t.Errorf("limiter fell back: %v", err) }))
	a, b := reps[0], reps[1]
	ctx := context.Background()
	allow := func(l *Limiter, who string) Decision {
		t.Helper()
		d, err := l.Allow(ctx, who)
		if err != nil {
			t.Fatal(err)
		}
		if d.Degraded {
			t.Fatalf("degraded with a healthy KV: %+v", d)
		}
		return d
	}

	if d := allow(a, "alice"); !d.Allowed || d.Bytes || d.Window != WindowMinute || d.Limit != 100 {
		t.Fatalf("first request: %+v", d)
	}
	a.ChargeBytes("alice", 600)
	if d := allow(a, "alice"); !d.Allowed { // 600 stored: under 1,000; writes them
		t.Fatalf("second request: %+v", d)
	}
	a.ChargeBytes("alice", 600) // 1,200 by a's state; the KV holds 600
	if d := allow(b, "alice"); !d.Allowed {
		t.Fatalf("b knows 600 bytes only, so admits: %+v", d)
	}
	d := allow(a, "alice")
	if d.Allowed || !d.Bytes || d.Window != WindowMinute || d.Limit != 1000 || d.RetryAfter != 30*time.Second ||
		!d.Reset.Equal(rlBase.Add(30*time.Second)) {
		t.Fatalf("a's refusal after 1,200 bytes: %+v", d)
	}
	// a wrote its 600 bytes as it refused: b refuses too.
	if d := allow(b, "alice"); d.Allowed || !d.Bytes || d.Window != WindowMinute {
		t.Fatalf("b after a's refusal: %+v", d)
	}
	// Another principal is not charged.
	if d := allow(b, "bob"); !d.Allowed {
		t.Fatalf("bob: %+v", d)
	}
	st, err := b.Status(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if st.Usage["request_bytes_last_minute"] != 1200 || st.Usage["request_bytes_last_hour"] != 1200 ||
		st.Limits["request_bytes_per_minute"] != 1000 || st.Remaining["request_bytes_per_minute"] != 0 ||
		st.Remaining["request_bytes_per_hour"] != 1300 || st.Usage["requests_last_minute"] != 3 {
		t.Fatalf("status: %+v", st)
	}
	if _, ok := st.Limits["request_bytes_per_day"]; ok {
		t.Fatal("a day budget listed that is not set")
	}

	// The next minute: the minute's budget is back, the hour's binds.
	clk.add(time.Minute)
	if d := allow(b, "alice"); !d.Allowed {
		t.Fatalf("next minute: %+v", d)
	}
	b.ChargeBytes("alice", 900)
	if d := allow(a, "alice"); !d.Allowed { // a reads 1,200 in the hour; b's 900 not written yet
		t.Fatalf("a before b's write: %+v", d)
	}
	b.ChargeBytes("alice", 500) // hour 2,600 by b's state
	d = allow(b, "alice")
	if d.Allowed || !d.Bytes || d.Window != WindowHour || d.Limit != 2500 {
		t.Fatalf("hour refusal: %+v", d)
	}
	if d := allow(a, "alice"); d.Allowed || d.Window != WindowHour {
		t.Fatalf("a after b's refusal: %+v", d)
	}
	// Status on the replica holding bytes not written counts them.
	b.ChargeBytes("alice", 100)
	if st, err := b.Status(ctx, "alice"); err != nil || st.Usage["request_bytes_last_hour"] != 2700 {
		t.Fatalf("status with 100 bytes pending here: %+v %v", st, err)
	}
	if st, err := a.Status(ctx, "alice"); err != nil || st.Usage["request_bytes_last_hour"] != 2600 {
		t.Fatalf("status on the other replica: %+v %v", st, err)
	}
}

// TestRateLimitBytesOldValue: a principal's value written before the budget
// of bytes ([index, count] per window) keeps its counts, with no bytes.
func TestRateLimitBytesOldValue(t *testing.T) {
	s := rlRunServer(t)
	clk := &rlClock{t: rlBase}
	_, js := rlConnect(t, s)
	kv := rlBucket(t, js)
	minute, hour, day := rlBase.Unix()/60, rlBase.Unix()/3600, rlBase.Unix()/86400
	old := []byte("[[" + strconv.FormatInt(minute, 10) + ",4],[" + strconv.FormatInt(hour, 10) + ",9],[" + strconv.FormatInt(day, 10) + ",9]]")
	if _, err := kv.Put(context.Background(), rateLimitKey("alice"), old); err != nil {
		t.Fatal(err)
	}
	l := NewLimiter(kv, LimiterConfig{Limits: RateLimits{PerMinute: 5, BytesPerMinute: 10}}, WithLimiterClock(clk.now))
	d, err := l.Allow(context.Background(), "alice")
	if err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("the fifth request of the minute: %+v %v", d, err)
	}
	if d, _ := l.Allow(context.Background(), "alice"); d.Allowed || d.Bytes || d.Limit != 5 {
		t.Fatalf("the sixth: %+v", d)
	}
}

// TestRateLimitBytesAnswer: a refusal of the budget of bytes says so in
// its body, and sets Retry-After and X-RateLimit-Reset but not the
// X-RateLimit-Limit and -Remaining of the request limits (a local limiter:
// no KV).
func TestRateLimitBytesAnswer(t *testing.T) {
	clk := &rlClock{t: rlBase}
	l := NewLimiter(nil, LimiterConfig{Limits: RateLimits{PerMinute: 10, BytesPerHour: 100}}, WithLimiterClock(clk.now))
	ctx := context.Background()
	if d, _ := l.Allow(ctx, "alice"); !d.Allowed {
		t.Fatalf("first: %+v", d)
	}
	l.ChargeBytes("alice", 0) // nothing stored: nothing charged
	l.ChargeBytes("bob", 500)
	if d, _ := l.Allow(ctx, "alice"); !d.Allowed {
		t.Fatalf("second: %+v", d)
	}
	l.ChargeBytes("alice", 100)
	d, _ := l.Allow(ctx, "alice")
	if d.Allowed || !d.Bytes || d.Window != WindowHour || d.Limit != 100 || d.RetryAfter != 59*time.Minute+30*time.Second {
		t.Fatalf("refusal: %+v", d)
	}
	w := httptest.NewRecorder()
	WriteRateLimited(w, d)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "3570" || w.Header().Get("X-RateLimit-Reset") == "" ||
		w.Header().Get("X-RateLimit-Limit") != "" || w.Header().Get("X-RateLimit-Remaining") != "" {
		t.Fatalf("answer: %d %v", w.Code, w.Header())
	}
	if b := d.ExceededBody(); b.Message != "Rate limit exceeded: 100 request bytes per hour" || !b.Retryable || b.RetryAfter != 3570 {
		t.Fatalf("body: %+v", b)
	}
	// A principal without a budget is not charged (nothing kept for it).
	free := NewLimiter(nil, LimiterConfig{Limits: RateLimits{PerMinute: 10}})
	free.ChargeBytes("alice", 1<<20)
	if len(free.entries) != 0 {
		t.Fatalf("entries kept without a budget: %d", len(free.entries))
	}
}

// TestRateLimitBytesConcurrentReplicasExact: 16 clients on two replicas,
// each admitted then charged 100 bytes, 5 times: however their writes
// conflict, no byte is lost or counted twice once each replica has
// written what it holds (one more admission each).
func TestRateLimitBytesConcurrentReplicasExact(t *testing.T) {
	s := rlRunServer(t)
	clk := &rlClock{t: rlBase}
	reps := rlReplicas(t, s, 2, LimiterConfig{Limits: RateLimits{BytesPerDay: 1 << 30}, OpTimeout: 5 * time.Second}, WithLimiterClock(clk.now),
		WithLimiterErrorHook(func(err error) { t.Errorf("limiter fell back: %v", err) }))
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for range 5 {
				d, err := reps[g%2].Allow(context.Background(), "hot")
				if err != nil || !d.Allowed || d.Degraded {
					t.Errorf("%+v %v", d, err)
					return
				}
				reps[g%2].ChargeBytes("hot", 100)
			}
		})
	}
	wg.Wait()
	for _, r := range reps {
		if d, err := r.Allow(context.Background(), "hot"); err != nil || !d.Allowed {
			t.Fatalf("%+v %v", d, err)
		}
	}
	for i, r := range reps {
		st, err := r.Status(context.Background(), "hot")
		if err != nil || st.Usage["request_bytes_last_day"] != 16*5*100 {
			t.Fatalf("replica %d: %+v %v, want %d bytes", i, st, err, 16*5*100)
		}
	}
}

// FuzzRateLimitState: whatever a principal's KV value holds (another
// replica's, an older build's, garbage), deciding on it and charging it
// never panics, a refusal waits at least a second, and bytes charged up to
// the minute's budget refuse the next request.
func FuzzRateLimitState(f *testing.F) {
	f.Add([]byte(`[[29462550,3,100],[491042,9,100],[20460,9,100]]`), int64(1767722430), 1, int64(50), int64(1000))
	f.Add([]byte(`[[1,2],[3,4],[5,6]]`), int64(0), 3, int64(0), int64(1))
	f.Add([]byte(`[[9223372036854775807,1,1],[0,0,0]]`), int64(-61), 0, int64(-5), int64(0))
	f.Add([]byte(`{}`), int64(9223372036854775807), 2, int64(7), int64(7))
	f.Fuzz(func(t *testing.T, val []byte, unix int64, k int, charge, budget int64) {
		var s rlState
		if json.Unmarshal(val, &s) != nil {
			s = rlState{}
		}
		k = max(k%1000, 1)
		now := time.Unix(unix, 0)
		limits := RateLimits{PerMinute: 5, PerHour: 50, BytesPerMinute: budget}
		if d, _ := decide(s, now, limits, k); !d.Allowed && d.RetryAfter < time.Second {
			t.Fatalf("refused with a wait of %v: %+v", d.RetryAfter, d)
		}
		for i := range s {
			if s[i][2] < 0 || s[i][2] > 1<<50 {
				return // no overflow-free sum to check
			}
		}
		if budget <= 0 || charge < budget || charge > 1<<50 {
			return
		}
		s.addBytes(unix, charge)
		if d, _ := decide(s, now, limits, k); d.Allowed {
			t.Fatalf("%d bytes charged against a budget of %d, then admitted: %+v (state %v)", charge, budget, d, s)
		}
	})
}
