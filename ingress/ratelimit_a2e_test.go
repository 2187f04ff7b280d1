package ingress_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestRateLimitChargesA2ELines: each message of an A2E body that submits
// work is charged (the gate charged one for the body; a body of up to 64
// requests counted once before): under a limit of 3 a minute a body of 5
// tool calls runs 3 and ends with the rate_limit_exceeded error of the 4th (the gate's refusal, as a line).
func TestRateLimitChargesA2ELines(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	kv, err := js.KeyValue(context.Background(), streams.RateLimitBucket)
	if err != nil {
		t.Fatal(err)
	}
	p := pipetest.Start(t, pipetest.WithConn(nc), pipetest.WithIngress(ingress.WithDefaultPool("demo"),
		ingress.WithLimiter(ingress.NewLimiter(kv, ingress.LimiterConfig{Limits: ingress.RateLimits{PerMinute: 3}}, ingress.WithLimiterClock(testkit.MidMinute())))))
	p.Pool("demo", demo.New())
	var lines []string
	for i := range 5 {
		lines = append(lines, `{"a2e":"1.0","id":"c`+strconv.Itoa(i)+`","type":"tool/call/req","req_id":"r-`+strconv.Itoa(i)+`","params":{"text":"x","frames":1}}`)
	}
	resp, b := testkit.Do(t, http.MethodPost, p.URL+"/a2e", strings.Join(lines, "\n")+"\n")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"code":"rate_limit_exceeded"`) || !strings.Contains(string(b), `"req_id":"r-3"`) {
		t.Fatalf("5 requests under a limit of 3: %d %s", resp.StatusCode, b)
	}
	if n := natstest.StoredWith(t, js, `"request_id"`, streams.RequestsStream); n != 3 {
		t.Fatalf("published %d requests, want 3", n)
	}
}
