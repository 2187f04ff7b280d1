package ingress

import (
	"context"
	"testing"
	"time"
)

// TestRateLimitCancelBudget: the budget of cancels (AllowCancel) is
// counted apart from the limits, per principal and per minute, shared by
// the replicas: alice over her limit of 1 a minute has 2 cancels, taken on
// either replica, the third refused with the budget's limit and the wait
// to the minute's end; her limits' count is untouched, bob's budget is his
// own, and the next minute gives her 2 again. Without a budget a cancel is
// refused.
func TestRateLimitCancelBudget(t *testing.T) {
	s := rlRunServer(t)
	clk := &rlClock{t: rlBase}
	reps := rlReplicas(t, s, 2, LimiterConfig{Limits: RateLimits{PerMinute: 1, PerDay: 100}, CancelsPerMinute: 2}, WithLimiterClock(clk.now),
		WithLimiterErrorHook(func(err error) { t.Errorf("limiter fell back: %v", err) }))
	ctx := context.Background()
	if d, err := reps[0].Allow(ctx, "alice"); err != nil || !d.Allowed {
		t.Fatalf("alice's first request: %+v %v", d, err)
	}
	if d, _ := reps[1].Allow(ctx, "alice"); d.Allowed {
		t.Fatalf("alice's second request admitted over her limit: %+v", d)
	}
	for i, r := range []*Limiter{reps[0], reps[1]} {
		d, err := r.AllowCancel(ctx, "alice")
		if err != nil || !d.Allowed || !d.Cancels || d.Window != WindowMinute || d.Limit != 2 || d.Remaining != 1-i {
			t.Fatalf("alice's cancel %d: %+v %v", i+1, d, err)
		}
	}
	d, err := reps[0].AllowCancel(ctx, "alice")
	if err != nil || d.Allowed || !d.Cancels || d.RetryAfter != 30*time.Second ||
		d.ExceededBody().Message != "Rate limit exceeded: 2 cancels per minute" {
		t.Fatalf("alice's third cancel: %+v %v (%q)", d, err, d.ExceededBody().Message)
	}
	st, err := reps[1].Status(ctx, "alice")
	if err != nil || st.Usage["requests_last_minute"] != 1 || st.Usage["requests_last_day"] != 1 {
		t.Fatalf("alice's limits after her cancels: %+v %v", st, err)
	}
	if d, err := reps[1].AllowCancel(ctx, "bob"); err != nil || !d.Allowed || d.Remaining != 1 {
		t.Fatalf("bob's cancel: %+v %v", d, err)
	}
	clk.add(time.Minute)
	if d, err := reps[1].AllowCancel(ctx, "alice"); err != nil || !d.Allowed || d.Remaining != 1 {
		t.Fatalf("alice's cancel the next minute: %+v %v", d, err)
	}

	off := NewLimiter(nil, LimiterConfig{Limits: RateLimits{PerMinute: 1}})
	if d, err := off.AllowCancel(ctx, "alice"); err != nil || d.Allowed || off.CancelsPerMinute() != 0 {
		t.Fatalf("a cancel without a budget: %+v %v", d, err)
	}
}
