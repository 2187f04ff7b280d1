package workflow

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// failingAPI is a real HTTP server whose handler the test chooses, counting
// the requests it receives.
func failingAPI(t *testing.T, h http.HandlerFunc) (url string, hits *atomic.Int32) {
	t.Helper()
	hits = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, hits
}

// A 5xx is retryable (spec §10) whatever the size of its body: an error
// page larger than MaxResponseBytes was a DataError, not retried and not
// retryable, and lost the status code.
func TestLargeErrorBodyStaysRetryable(t *testing.T) {
	en := newEnv(t, func(o *Options) { o.Limits.MaxResponseBytes = 1024 })
	url, hits := failingAPI(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "<html>"+strings.Repeat("maintenance ", 1000)+"</html>")
	})
	out, _ := en.run(t, lines(op("a", `{"ApiCall":{"method":"GET","url":"`+url+`/x","outputPath":"/workflow/a"}}`), begin("a")))
	if out.Error == nil || out.Error.Type != ExecutionError || !out.Error.Retryable || out.Error.Details["statusCode"] != 503 {
		t.Fatalf("error: %+v", out.Error)
	}
	if n := hits.Load(); n != 4 {
		t.Errorf("%d attempts, want 4 (3 retries)", n)
	}
	if s, _ := out.Error.Details["response"].(string); len(s) > 1100 {
		t.Errorf("snippet of %d bytes", len(s))
	}
}
