package ingress_test

import (
	"encoding/json"
	"errors"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// spec429 checks a refusal of the workflow API: 429, the A2E workflow
// specification's body (and the pipeline's retryable, true, which every
// other error object of the API carries) and headers.
func spec429(t *testing.T, resp *http.Response, b []byte, msg string) {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("429 body %s: %v", b, err)
	}
	ra, _ := body["retry_after"].(float64)
	if resp.StatusCode != http.StatusTooManyRequests || len(body) != 4 || body["error"] != "Rate limit exceeded" ||
		body["message"] != msg || ra < 1 || body["retryable"] != true {
		t.Fatalf("refusal %d %s", resp.StatusCode, b)
	}
	for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("no %s", h)
		}
	}
}

// TestWorkflowRateLimitDefaults: without a server-wide limiter the workflow
// REST API applies the specification's per-agent limits (60/min, 1000/h,
// 10000/day), answers rate-limit/status with them instead of 501, and
// refuses with the specification's 429; the other endpoints stay unlimited
// (issue 16: the workflow API was never limited).
func TestWorkflowRateLimitDefaults(t *testing.T) {
	_, nc := natstest.RunServer(t)
	url := frontDoor(t, nc, ingress.WithWorkflow(workflow.New(workflow.Options{})))
	resp, b := do(t, "GET", url+"/api/v1/rate-limit/status", "")
	var st struct {
		AgentID string           `json:"agent_id"`
		Limits  map[string]int   `json:"limits"`
		Usage   map[string]int   `json:"usage"`
		Reset   map[string]int64 `json:"reset"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &st) != nil || st.AgentID != "anonymous" ||
		st.Limits["requests_per_minute"] != 60 || st.Limits["requests_per_hour"] != 1000 || st.Limits["requests_per_day"] != 10000 {
		t.Fatalf("status %d %s", resp.StatusCode, b)
	}
	// Each window's reset (Unix seconds), as the X-RateLimit-Reset header
	// gives the binding one's: after now, within the window's length.
	now := time.Now().Unix()
	for w, size := range map[string]int64{"minute": 60, "hour": 3600, "day": 86400} {
		if r := st.Reset["requests_per_"+w]; r <= now-1 || r > now+size+1 {
			t.Errorf("reset of the %s window %d (now %d): %s", w, r, now, b)
		}
	}
	resp, _ = do(t, "GET", url+"/api/v1/capabilities", "")
	if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Limit") == "" {
		t.Fatalf("capabilities %d %v", resp.StatusCode, resp.Header)
	}
	_, b = do(t, "GET", url+"/api/v1/rate-limit/status", "")
	if json.Unmarshal(b, &st) != nil || st.Usage["requests_last_day"] != 1 {
		t.Fatalf("usage after one call (status reads are free): %s", b)
	}
	// Other endpoints are not limited by the workflow defaults.
	resp, b = do(t, "POST", url+"/v1/requests?agent=demo", `{"params":{"text":"x"}}`)
	if resp.StatusCode >= 400 && resp.StatusCode != 404 || resp.Header.Get("X-RateLimit-Limit") != "" {
		t.Fatalf("E2A endpoint %d %v %s", resp.StatusCode, resp.Header, b)
	}

	// Configured limits: the third call of the day is refused with the
	// specification's body, whatever the endpoint of the workflow API.
	url = frontDoor(t, nc, ingress.WithWorkflow(workflow.New(workflow.Options{})),
		ingress.WithWorkflowRateLimits(ingress.RateLimits{PerDay: 2}), withAPIKey(t))
	body := `{"workflow":"{\"type\":\"operationUpdate\",\"operationId\":\"w\",\"operation\":{\"Wait\":{\"duration\":0}}}\n{\"type\":\"beginExecution\",\"executionId\":\"rl-1\",\"operationOrder\":[\"w\"]}"}`
	for i := 0; i < 2; i++ {
		if resp, b := do(t, "POST", url+"/api/v1/workflows/validate", body, "X-Api-Key", testKey); resp.StatusCode != 200 {
			t.Fatalf("validate %d: %d %s", i, resp.StatusCode, b)
		}
	}
	resp, b = do(t, "POST", url+"/api/v1/workflows/validate", body, "X-Api-Key", testKey)
	spec429(t, resp, b, "Rate limit exceeded: 2 requests per day")
	resp, b = do(t, "GET", url+"/api/v1/executions/rl-1", "", "X-Api-Key", testKey)
	spec429(t, resp, b, "Rate limit exceeded: 2 requests per day")

	// RateLimits{} turns them off: status is 501 again.
	url = frontDoor(t, nc, ingress.WithWorkflow(workflow.New(workflow.Options{})), ingress.WithWorkflowRateLimits(ingress.RateLimits{}))
	if resp, _ := do(t, "GET", url+"/api/v1/rate-limit/status", ""); resp.StatusCode != http.StatusNotImplemented {
		t.Fatalf("limits off: %d", resp.StatusCode)
	}
	// Negative limits are refused.
	eg, err := egress.New(nc, egress.WithRegisterer(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ingress.New(nc, eg, ingress.WithRegisterer(prometheus.NewRegistry()),
		ingress.WithWorkflowRateLimits(ingress.RateLimits{PerMinute: -1})); !errors.Is(err, ingress.ErrInvalidRateLimits) {
		t.Fatalf("negative limits: %v", err)
	}
}

// TestWorkflowRateLimitShared: with a server-wide limiter the workflow API
// counts against it, like every endpoint.
func TestWorkflowRateLimitShared(t *testing.T) {
	_, nc := natstest.RunServer(t)
	lim := ingress.NewLimiter(nil, ingress.LimiterConfig{Limits: ingress.RateLimits{PerDay: 3}}, ingress.WithLimiterClock(testkit.MidMinute()))
	url := frontDoor(t, nc, ingress.WithWorkflow(workflow.New(workflow.Options{})), ingress.WithLimiter(lim), withAPIKey(t))
	for i := 0; i < 2; i++ {
		if resp, b := do(t, "POST", url+"/v1/requests?agent=demo", `{"params":{"text":"x"}}`, "X-Api-Key", testKey); resp.StatusCode == 429 {
			t.Fatalf("E2A %d: %s", i, b)
		}
	}
	if resp, b := do(t, "GET", url+"/api/v1/capabilities", "", "Authorization", "Bearer "+testKey); resp.StatusCode != 200 {
		t.Fatalf("capabilities %d %s", resp.StatusCode, b)
	}
	resp, b := do(t, "GET", url+"/api/v1/capabilities", "", "X-Api-Key", testKey)
	spec429(t, resp, b, "Rate limit exceeded: 3 requests per day")
	_, b = do(t, "GET", url+"/api/v1/rate-limit/status", "", "X-Api-Key", testKey)
	if !strings.Contains(string(b), `"requests_last_day":3`) || !strings.Contains(string(b), `"agent_id":"alice"`) {
		t.Fatalf("status %s", b)
	}
}

// TestWorkflowBearerAPIKey: the workflow API accepts an API key as
// "Authorization: Bearer <api-key>" (the specification's form) as well as
// X-Api-Key; a wrong one is 401; other endpoints keep refusing an API key
// in Authorization (issue 16).
func TestWorkflowBearerAPIKey(t *testing.T) {
	_, nc := natstest.RunServer(t)
	url := frontDoor(t, nc, ingress.WithWorkflow(workflow.New(workflow.Options{})), withAPIKey(t))
	for _, hdr := range [][]string{{"Authorization", "Bearer " + testKey}, {"Authorization", "bearer  " + testKey}, {"X-Api-Key", testKey}} {
		resp, b := do(t, "GET", url+"/api/v1/capabilities", "", hdr...)
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"agent_id":"alice"`) {
			t.Fatalf("%v: %d %s", hdr, resp.StatusCode, b)
		}
	}
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer ak_wrong_0123456789abcdef"}, {"Authorization", "Basic " + testKey}} {
		if resp, b := do(t, "GET", url+"/api/v1/capabilities", "", hdr...); resp.StatusCode != 401 || strings.Contains(string(b), testKey) {
			t.Fatalf("%v: %d %s", hdr, resp.StatusCode, b)
		}
	}
	// Unchanged elsewhere: an API key is an X-Api-Key there.
	if resp, _ := do(t, "POST", url+"/v1/requests", `{"params":{"text":"x"}}`, "Authorization", "Bearer "+testKey); resp.StatusCode != 401 {
		t.Fatalf("E2A endpoint accepted an API key as a bearer token: %d", resp.StatusCode)
	}
}

// TestWorkflowAPIRefusesCrossSiteBodies: a page on another site can make
// its visitor's browser POST text/plain, a form or no Content-Type without
// a CORS preflight, always with an Origin header; the workflow API read
// such a body (text/plain as raw JSONL) and ran the workflow, where every
// other door answers 415. From a browser those are 415 now and nothing
// runs; curl and scripts (no Origin) still send raw JSONL as text/plain.
func TestWorkflowAPIRefusesCrossSiteBodies(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js, _ := jetstream.New(nc)
	// No workflow pool runs: an execute the API wrongly takes waits for its
	// result the caller's maxExecutionTime and 5 s, kept short here so the
	// test fails in seconds, not minutes.
	url := frontDoor(t, nc, ingress.WithWorkflow(workflow.New(workflow.Options{Limits: workflow.Limits{MaxExecutionTime: time.Second}})))
	jsonl := `{"type":"operationUpdate","operationId":"w","operation":{"Wait":{"duration":0}}}` + "\n" +
		`{"type":"beginExecution","executionId":"xs-1","operationOrder":["w"]}`
	wrapped, _ := json.Marshal(map[string]string{"workflow": jsonl})
	origin := []string{"Origin", "https://evil.example"}
	before := streamMsgs(t, js, "E2A_REQUESTS")
	for _, c := range []struct {
		body string
		hdr  []string
	}{
		{jsonl, append([]string{"Content-Type", "text/plain;charset=UTF-8"}, origin...)},
		{string(wrapped), append([]string{"Content-Type", "application/x-www-form-urlencoded"}, origin...)},
		{string(wrapped), append([]string{"Content-Type", "multipart/form-data; boundary=x"}, origin...)},
		{string(wrapped), origin},
		// A content coding the API does not decode, as at every door.
		{string(wrapped), []string{"Content-Type", "application/json", "Content-Encoding", "gzip"}},
	} {
		for _, path := range []string{"/api/v1/workflows/execute", "/api/v1/workflows/validate"} {
			resp, b := do(t, "POST", url+path, c.body, c.hdr...)
			if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(string(b), "ValidationError") {
				t.Errorf("POST %s %v: %d %s, want 415", path, c.hdr, resp.StatusCode, b)
			}
		}
	}
	if n := streamMsgs(t, js, "E2A_REQUESTS"); n != before {
		t.Errorf("%d requests published by refused calls", n-before)
	}
	for _, hdr := range [][]string{
		{"Content-Type", "text/plain"},                                  // raw JSONL from a script
		append([]string{"Content-Type", "application/json"}, origin...), // a browser app: preflighted
	} {
		body := jsonl
		if len(hdr) > 2 {
			body = string(wrapped)
		}
		if resp, b := do(t, "POST", url+"/api/v1/workflows/validate", body, hdr...); resp.StatusCode != http.StatusOK {
			t.Errorf("validate %v: %d %s, want 200", hdr, resp.StatusCode, b)
		}
	}
}
