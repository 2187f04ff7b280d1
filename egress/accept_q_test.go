package egress

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestStreamAcceptWeighsQValues: RFC 9110 §12.5.1 makes q-values the
// client's preference. A client that prefers SSE (q=1) and tolerates
// NDJSON (q=0.1) got NDJSON from GET /v1/requests/{id}/stream, whatever
// the order of the types: NDJSON was tested first and q not weighed.
func TestStreamAcceptWeighsQValues(t *testing.T) {
	h := startHTTP(t)
	h.finished(t, "req_q", 1)
	for _, accept := range []string{
		"text/event-stream, application/x-ndjson;q=0.1",
		"application/x-ndjson;q=0.1, text/event-stream",
	} {
		resp, _ := testkit.Do(t, http.MethodGet, h.srv.URL+"/v1/requests/req_q/stream", "", "Accept", accept)
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Errorf("Accept: %s answered %d %q, want text/event-stream", accept, resp.StatusCode, ct)
		}
	}
}

// TestServeE2AAcceptWeighsQValues: the answer of a POST (ServeE2A)
// ignored q-values too: SSE was tested first, so a client that prefers the
// aggregated JSON or NDJSON and lists SSE at q=0.1 as a fallback got SSE.
// Ties keep the order SSE, NDJSON, JSON.
func TestServeE2AAcceptWeighsQValues(t *testing.T) {
	h := startHTTP(t)
	h.finished(t, "req_p", 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.svc.ServeE2A(w, r, "req_p")
	}))
	defer srv.Close()
	for accept, want := range map[string]string{
		"application/json, text/event-stream;q=0.1":          "application/json",
		"application/x-ndjson, text/event-stream;q=0.1":      "application/x-ndjson",
		"text/event-stream;q=0.1, application/x-ndjson":      "application/x-ndjson",
		"application/json, text/event-stream":                "text/event-stream",
		"application/x-ndjson;q=0.5, application/json;q=0.5": "application/x-ndjson",
		"*/*": "application/json",
	} {
		resp, _ := testkit.Do(t, http.MethodGet, srv.URL, "", "Accept", accept)
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, want) {
			t.Errorf("Accept: %s answered %d %q, want %s", accept, resp.StatusCode, ct, want)
		}
	}
}
