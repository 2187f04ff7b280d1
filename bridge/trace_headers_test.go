package bridge

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// traceUpstream is an upstream recording the traceparent of each call.
func traceUpstream(t *testing.T) (*Client, <-chan string) {
	t.Helper()
	got := make(chan string, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- r.Header.Get("traceparent")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(up.Close)
	c, err := NewClient(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c, got
}

// An envelope an integrator publishes straight onto e2a.req.<pool>.<id>
// (a supported entry point) reached the bridge with its "trace" as
// written: neither e2a.FromJSON nor the agent runtime checked it (the
// front door's normalizer did, for HTTP clients). With tracing off (the
// default), Client.SetHeaders copied env.Trace onto the upstream call as
// is, so a traceparent ending in a line feed made net/http refuse the
// request: the upstream call failed (upstream_protocol_error, the request
// ended in an e2a.error) because of a trace header that should have been
// ignored. SetHeaders now sends only what e2a.CleanTrace keeps.
func TestMalformedTraceparentDoesNotFailUpstreamCall(t *testing.T) {
	c, _ := traceUpstream(t)
	env := &e2a.Envelope{RequestID: "tp-1", Trace: &e2a.TraceContext{
		Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n"}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.Base().String()+"/run", strings.NewReader("{}"))
	resp, err := c.Do(req, env)
	if err != nil {
		t.Fatalf("the upstream call failed because of the envelope's malformed traceparent %q: %v",
			env.Trace.Traceparent, err)
	}
	_ = resp.Body.Close()
}

// A traceparent that is not W3C (uppercase hex, wrong length) was
// forwarded to the upstream as is; W3C Trace Context says a receiver that
// cannot parse traceparent must not propagate it (restart the trace), and
// the front door drops such a value (e2a.ValidTraceparent), as SetHeaders
// now does.
func TestInvalidTraceparentNotForwardedToUpstream(t *testing.T) {
	c, got := traceUpstream(t)
	const bad = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01" // uppercase: invalid
	env := &e2a.Envelope{RequestID: "tp-2", Trace: &e2a.TraceContext{Traceparent: bad}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.Base().String()+"/run", strings.NewReader("{}"))
	resp, err := c.Do(req, env)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	select {
	case tp := <-got:
		if tp == bad {
			t.Fatalf("the upstream received the invalid traceparent %q as is", tp)
		}
	case <-ctx.Done():
		t.Fatal("upstream not called")
	}
}

// TestFailureLogNamesTraceAndCorrelation: the bridge's log lines of a
// request's failed upstream call (the retry's and the failure's) carry
// its correlation id and traceparent, as the agent runtime's request log
// does (docs/operations.md: logs carry the traceparent where known); they
// had the request id alone, so a trace's failure could not be found in
// the bridge's log.
func TestFailureLogNamesTraceAndCorrelation(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	h, err := New("p", &clientUpstream{c: c, url: srv.URL + "/agent"}, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
		WithMetrics(prometheus.NewRegistry()), WithRetry(1, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	env := &e2a.Envelope{RequestID: "r-log", CorrelationID: "corr-9", Trace: &e2a.TraceContext{Traceparent: tp}}
	if err := h.Serve(context.Background(), env, &recWriter{}); err == nil {
		t.Fatal("Serve of an upstream answering 503: no error")
	}
	for _, msg := range []string{"upstream call failed before any frame; retrying", "upstream call failed"} {
		found := false
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, `msg="`+msg+`"`) {
				found = true
				if !strings.Contains(line, "traceparent="+tp) || !strings.Contains(line, "correlation_id=corr-9") || !strings.Contains(line, "request_id=r-log") {
					t.Errorf("log line %q lacks the request's traceparent, correlation id or id", line)
				}
			}
		}
		if !found {
			t.Errorf("no %q line:\n%s", msg, logs.String())
		}
	}
}
