package ingress

import (
	"context"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/obs"
	"github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestChargeRefusalCarriesRateLimitHeaders: a door admitted by the gate
// (host.Gate.Admit: the gate's charge sets X-RateLimit-* on the answer)
// charges more of the caller's limit with caller.Charge and renders its
// refusal with its own host.Refuse, as the gate's refusals are rendered.
// Charge wrote the limiter's headers into a header map of its own, thrown
// away: the answer kept the gate's stale X-RateLimit-Remaining, and a
// refusal rendered in a shape that sets no Retry-After itself (A2A's
// JSON-RPC error, RefuseJSONRPC) reached the client without one. While
// the answer has not started, Charge's headers are the answer's.
func TestChargeRefusalCarriesRateLimitHeaders(t *testing.T) {
	_, nc := natstest.RunServer(t)
	kv, err := natstest.JetStream(t, nc).KeyValue(context.Background(), streams.RateLimitBucket)
	if err != nil {
		t.Fatal(err)
	}
	eg, err := egress.New(nc, egress.WithRegisterer(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(nc, eg, WithRegisterer(prometheus.NewRegistry()),
		WithLimiter(NewLimiter(kv, LimiterConfig{Limits: RateLimits{PerMinute: 2}}, WithLimiterClock(testkit.MidMinute()))))
	if err != nil {
		t.Fatal(err)
	}
	rr := httptest.NewRecorder()
	w := &statusRecorder{StatusWriter: obs.StatusWriter{ResponseWriter: rr}} // as Server.counted wraps every door
	r := httptest.NewRequest(http.MethodPost, "/a2a", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"message/send"}`))
	r.Header.Set("Content-Type", "application/json")
	c, ok := protocolHost{s}.Admit(w, r, a2a.Name, a2a.Refuse)
	if !ok {
		t.Fatalf("Admit: %d %s", rr.Code, rr.Body)
	}
	if f := c.Charge(r.Context(), a2a.Name, 1); f != nil {
		t.Fatalf("the limit's second request: refused %+v", *f)
	}
	if got := w.Header().Get("X-RateLimit-Remaining"); got != "0" {
		t.Errorf("after the gate's charge and one more (limit 2): X-RateLimit-Remaining %q; want \"0\", not the gate's", got)
	}
	f := c.Charge(r.Context(), a2a.Name, 1)
	if f == nil || f.Status != http.StatusTooManyRequests {
		t.Fatalf("the third request under a limit of 2: %+v; want a 429 refusal", f)
	}
	var refuse host.Refuse = a2a.Refuse // the A2A JSON-RPC door's shape
	refuse(w, *f)
	resp := rr.Result()
	want := strconv.Itoa(int(f.RetryAfter.Seconds()))
	if got := resp.Header.Get("Retry-After"); resp.StatusCode != http.StatusTooManyRequests || got == "" || got != want {
		t.Errorf("a Charge refusal rendered by the A2A JSON-RPC door: %d, Retry-After %q (X-RateLimit-* %q %q); want 429 Retry-After %s",
			resp.StatusCode, got, resp.Header.Get("X-RateLimit-Limit"), resp.Header.Get("X-RateLimit-Remaining"), want)
	}
}
