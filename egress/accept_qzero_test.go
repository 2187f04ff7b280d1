package egress

import (
	"net/http"
	"strings"
	"testing"
)

// TestAcceptQZeroExcludes: RFC 9110 §12.4.2 writes a qvalue of zero as
// "0", "0.0", "0.00" or "0.000"; each excludes its type. Only the literal
// "0" did: a client that ruled NDJSON out with q=0.0 got NDJSON from
// GET /v1/requests/{id}/stream (and SSE from a POST that ruled SSE out so).
func TestAcceptQZeroExcludes(t *testing.T) {
	for _, q := range []string{"0", "0.0", "0.00", "0.000"} {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Accept", "text/event-stream;q="+q+", application/json")
		if Accepts(r, "text/event-stream") {
			t.Errorf("Accept: %s lists text/event-stream as acceptable", r.Header.Get("Accept"))
		}
	}
	for _, q := range []string{"0.001", "0.5", "1", "1.0"} {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Accept", "text/event-stream;q="+q)
		if !Accepts(r, "text/event-stream") {
			t.Errorf("Accept: %s does not list text/event-stream as acceptable", r.Header.Get("Accept"))
		}
	}
	h := startHTTP(t)
	h.finished(t, "req_q", 1)
	resp := h.get(t, "/v1/requests/req_q/stream", "Accept", "application/x-ndjson;q=0.0, text/event-stream")
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("Accept: application/x-ndjson;q=0.0, text/event-stream answered %q", ct)
	}
}
