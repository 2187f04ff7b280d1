package ingress_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/e2a-pipeline/pipeline/ingress"
)

// A budget of request bytes: 4 KiB an hour per principal, beside 100
// requests a minute. Every door admits a call with Allow and charges what
// it then stored with ChargeBytes; the request that crosses the budget is
// admitted (its size was not known), the next is refused until the hour
// ends. A nil KV gives a limiter of this process alone; ingress.New's
// servers share one through the E2A_RATELIMIT bucket (EnsureRateLimitBucket).
func ExampleLimiter_ChargeBytes() {
	now := time.Date(2026, 12, 5, 10, 15, 0, 0, time.UTC)
	lim := ingress.NewLimiter(nil, ingress.LimiterConfig{Limits: ingress.RateLimits{PerMinute: 100, BytesPerHour: 4096}},
		ingress.WithLimiterClock(func() time.Time { return now }))
	ctx := context.Background()
	for _, size := range []int64{3000, 3000, 3000} {
		d, _ := lim.Allow(ctx, "alice")
		if !d.Allowed {
			h := http.Header{}
			d.SetHeaders(h)
			fmt.Printf("refused: %s (Retry-After %s)\n", d.ExceededBody().Message, h.Get("Retry-After"))
			break
		}
		lim.ChargeBytes("alice", size) // published: its stored size
		fmt.Printf("admitted, %d requests left this minute\n", d.Remaining)
	}
	st, _ := lim.Status(ctx, "alice")
	fmt.Println("bytes this hour:", st.Usage["request_bytes_last_hour"])
	// Output:
	// admitted, 99 requests left this minute
	// admitted, 98 requests left this minute
	// refused: Rate limit exceeded: 4096 request bytes per hour (Retry-After 2700)
	// bytes this hour: 6000
}
