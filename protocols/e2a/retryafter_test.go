package e2a_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	e2aproto "github.com/e2a-pipeline/pipeline/protocols/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// TestRefusalRetryAfter: an E2A refusal carries the refusal's wait as
// Retry-After (whole seconds rounded up, at least 1) when the answer has
// none yet; one already set (the gate's) wins, and a retryable refusal
// with no known wait still says 1. Every refusal said 1, whatever its
// wait (a rate limit's 15 s window: the client came back 14 times early).
func TestRefusalRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    host.Refusal
		want string
	}{
		{"rate limit window", host.Refusal{Status: 429, Code: "rate_limit_exceeded", Message: "slow down", Retryable: true, RetryAfter: 15 * time.Second}, "15"},
		{"rounded up", host.Refusal{Status: 503, Code: "unavailable", Message: "retry later", Retryable: true, RetryAfter: 1500 * time.Millisecond}, "2"},
		{"no wait known", host.Refusal{Status: 503, Code: "unavailable", Message: "retry later", Retryable: true}, "1"},
		{"not retryable", host.Refusal{Status: 401, Code: "unauthenticated", Message: "no credentials"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := post(newHost(func(h *conformance.Host) { h.Refusal = &tc.f }), "/v1/requests", `{"params":{}}`)
			if e := errorOf(t, rec); rec.Code != tc.f.Status || e.Code != tc.f.Code {
				t.Fatalf("%d %+v, want %d %s", rec.Code, e, tc.f.Status, tc.f.Code)
			}
			if got := rec.Header().Get("Retry-After"); got != tc.want {
				t.Errorf("Retry-After %q, want %q (wait %v)", got, tc.want, tc.f.RetryAfter)
			}
		})
	}
	rec := httptest.NewRecorder()
	rec.Header().Set("Retry-After", "9")
	e2aproto.Refuse(rec, host.Refusal{Status: http.StatusTooManyRequests, Code: "rate_limit_exceeded", Message: "slow down",
		Retryable: true, RetryAfter: 40 * time.Second})
	if got := rec.Header().Get("Retry-After"); got != "9" {
		t.Errorf("the gate's Retry-After 9 became %q", got)
	}
}

// withWait makes f's wait d for the rest of the test (a test that calls it
// runs alone: it changes a refusal every door renders).
func withWait(t *testing.T, f *host.Refusal, d time.Duration) {
	t.Helper()
	was := f.RetryAfter
	f.RetryAfter = d
	t.Cleanup(func() { f.RetryAfter = was })
}

// TestDoorRendersRefusalsWait: the door answers a stream slot refused
// (host.TooManyStreams) and a request the pipeline could not accept
// (backpressure, the server shutting down: its unavailable refusal) with
// the refusal's own wait, as every door does: made 3 s, each says
// Retry-After: 3 (the door set 1 by hand, whatever the refusal's wait).
func TestDoorRendersRefusalsWait(t *testing.T) {
	withWait(t, &host.TooManyStreams, 3*time.Second)
	withWait(t, e2aproto.Unavailable, 3*time.Second)
	for name, c := range map[string]struct {
		set    func(h *conformance.Host)
		header []string
	}{
		"too many streams": {func(h *conformance.Host) { h.NoSlot = true }, []string{"Accept", "text/event-stream"}},
		"backpressure":     {func(h *conformance.Host) { h.PublishErr = host.ErrBackpressure }, nil},
		"shutting down":    {func(h *conformance.Host) { h.PublishErr = egress.ErrShuttingDown }, nil},
		"task unreadable":  {func(h *conformance.Host) { h.RecordErr = host.ErrBackpressure }, nil},
	} {
		body := `{"params":{}}`
		if name == "task unreadable" {
			body = `{"task_id":"t-1","params":{}}`
		}
		rec := post(newHost(c.set), "/v1/requests", body, c.header...)
		if got := rec.Header().Get("Retry-After"); got != "3" {
			t.Errorf("%s: %d Retry-After %q, want the refusal's 3 s", name, rec.Code, got)
		}
	}
}
