package ingress

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestReviewGateDeadlineIsNotLimiterDown: a call whose own deadline passed
// while its rate limit was being read from the KV ended with its client;
// the gate answers nothing, as for a canceled call (a gRPC call's status
// is then its deadline's). Only context.Canceled was taken for that: a
// deadline was answered 503 "rate limiter unavailable" with Retry-After,
// a limiter that fails open saying it was down.
func TestReviewGateDeadlineIsNotLimiterDown(t *testing.T) {
	_, js := rlConnect(t, rlRunServer(t))
	kv, err := EnsureRateLimitBucket(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	var hookErr error
	s := &Server{opts: options{limiter: NewLimiter(kv, LimiterConfig{Limits: DefaultRateLimits()},
		WithLimiterErrorHook(func(err error) { hookErr = err }))}}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	hdr := http.Header{}
	f, canceled := s.rateLimit(ctx, Principal{UserID: "alice"}, "e2a", 1, hdr, false, nil)
	if f != nil || !canceled || hdr.Get("Retry-After") != "" || hookErr != nil {
		t.Errorf("a call past its deadline: refusal %+v, canceled %v, Retry-After %q, limiter error %v; "+
			"want no refusal, canceled, as a canceled call", f, canceled, hdr.Get("Retry-After"), hookErr)
	}
}
