package a2av1_test

import (
	"encoding/json"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"net/http"
	"testing"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
)

// TestRateLimitedCallEchoesID: a JSON-RPC call refused by the principal's
// rate limit is answered with the call's id (JSON-RPC 2.0 §5: id null
// only when the request's id could not be read), on every door that
// speaks JSON-RPC for A2A: v1.0 at /a2a/v1, a v1.0 call at /a2a, v0.3
// and AgentVault at /a2a. The v1.0 binding answered "id": null: its gate
// refusal was written before the body was read. A batch, whose id is no
// one call's, stays null. The HTTP+JSON binding's 429 is
// RESOURCE_EXHAUSTED with its Retry-After.
func TestRateLimitedCallEchoesID(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("demo"),
		ingress.WithLimiter(ingress.NewLimiter(nil, ingress.LimiterConfig{Limits: ingress.RateLimits{PerMinute: 1}}, ingress.WithLimiterClock(testkit.MidMinute())))))
	p.Pool("demo", echoAgent())
	v1 := map[string]string{"A2A-Version": "1.0"}
	// The one request of the minute.
	if code, _, body := rawCall(t, "GET", p.URL+a2av1.Path+"/tasks", "", v1); code != http.StatusOK {
		t.Fatalf("first call: %d %s", code, body)
	}
	for _, c := range []struct {
		name, path, body, wantID string
		hdr                      map[string]string
	}{
		{"v1.0 /a2a/v1", a2av1.Path, `{"jsonrpc":"2.0","id":7,"method":"ListTasks","params":{}}`, `7`, v1},
		{"v1.0 /a2a/v1 string id", a2av1.Path, `{"jsonrpc":"2.0","id":"a<b","method":"GetTask","params":{"id":"x"}}`, `"a<b"`, v1},
		{"v1.0 /a2a/v1 big id", a2av1.Path, `{"jsonrpc":"2.0","id":12345678901234567890,"method":"ListTasks","params":{}}`, `12345678901234567890`, v1},
		{"v1.0 /a2a/v1 stream", a2av1.Path, `{"jsonrpc":"2.0","id":"s","method":"SendStreamingMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`, `"s"`, v1},
		{"v1.0 at /a2a", "/a2a", `{"jsonrpc":"2.0","id":8,"method":"ListTasks","params":{}}`, `8`, v1},
		{"v0.3 /a2a", "/a2a", `{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"id":"x"}}`, `9`, nil},
		{"AgentVault /a2a", "/a2a", `{"jsonrpc":"2.0","id":"av","method":"tasks/get","params":{"id":"x"}}`, `"av"`, map[string]string{"X-Api-Key": "k"}},
		{"v1.0 batch", a2av1.Path, `[{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}]`, `null`, v1},
		{"v1.0 unreadable", a2av1.Path, `{"jsonrpc":"2.0","id":1,`, `null`, v1},
	} {
		code, hdr, body := rawCall(t, "POST", p.URL+c.path, c.body, c.hdr)
		if code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
			t.Errorf("%s: %d (Retry-After %q) %s; want 429 with Retry-After", c.name, code, hdr.Get("Retry-After"), body)
			continue
		}
		var r struct {
			ID    json.RawMessage `json:"id"`
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil || r.Error == nil {
			t.Errorf("%s: answer %s: %v", c.name, body, err)
			continue
		}
		if string(r.ID) != c.wantID {
			t.Errorf("%s: id %s, want %s (the call's): %s", c.name, r.ID, c.wantID, body)
		}
		if r.Error.Code != jsonrpc.CodeRateLimited {
			t.Errorf("%s: code %d, want %d: %s", c.name, r.Error.Code, jsonrpc.CodeRateLimited, body)
		}
	}
	code, hdr, body := rawCall(t, "GET", p.URL+a2av1.Path+"/tasks/x", "", v1)
	var st struct {
		Error struct {
			Code   int    `json:"code"`
			Status string `json:"status"`
		} `json:"error"`
	}
	if code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" || json.Unmarshal([]byte(body), &st) != nil ||
		st.Error.Code != http.StatusTooManyRequests || st.Error.Status != "RESOURCE_EXHAUSTED" {
		t.Errorf("HTTP+JSON: %d (Retry-After %q) %s; want 429 RESOURCE_EXHAUSTED with Retry-After", code, hdr.Get("Retry-After"), body)
	}
}
