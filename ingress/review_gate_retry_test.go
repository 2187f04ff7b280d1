package ingress_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/ingress"
)

// TestReviewGateV1RateLimitRetryInfo: a JSON-RPC call to A2A v1.0's
// /a2a/v1 over the principal's rate limit is -32029 with the 429 body as a
// google.protobuf.Struct detail and the wait as a google.rpc.RetryInfo
// (AUTH.md, Rate limits), the delay the Retry-After header's. The gate's
// refusal named no wait, so the binding wrote the Struct alone: a client
// reading the spec's details could not tell when to retry.
func TestReviewGateV1RateLimitRetryInfo(t *testing.T) {
	// A fixed clock 30 s into a minute: both calls in one window, 30 s
	// left of it.
	now := func() time.Time { return time.Unix(1_700_000_010, 0) }
	p := startPipelineWith(t, ingress.WithLimiter(ingress.NewLimiter(nil, ingress.LimiterConfig{Limits: ingress.RateLimits{PerMinute: 1}},
		ingress.WithLimiterClock(now))))
	call := `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`
	if r := p.post(t, ingress.A2AV1Path, "", call); r.StatusCode != http.StatusOK {
		t.Fatalf("first call: %d; want 200 (within 1 a minute)", r.StatusCode)
	}
	r := p.post(t, ingress.A2AV1Path, "", call)
	b, _ := io.ReadAll(r.Body)
	var out struct {
		Error struct {
			Code int               `json:"code"`
			Data []json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &out); err != nil || r.StatusCode != http.StatusTooManyRequests || out.Error.Code != -32029 {
		t.Fatalf("second call: %d %s; want 429 with error -32029", r.StatusCode, b)
	}
	ra := r.Header.Get("Retry-After")
	var delay string
	for _, d := range out.Error.Data {
		var typed struct {
			Type       string `json:"@type"`
			RetryDelay string `json:"retryDelay"`
		}
		if json.Unmarshal(d, &typed) == nil && typed.Type == "type.googleapis.com/google.rpc.RetryInfo" {
			delay = typed.RetryDelay
		}
	}
	if ra != "30" || delay != ra+"s" {
		t.Errorf("second call over 1 a minute: Retry-After %q, RetryInfo delay %q in %s; want a RetryInfo of the Retry-After's seconds", ra, delay, b)
	}
}
