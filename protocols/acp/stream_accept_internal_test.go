package acp

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestLoadStreamAcceptsAsPrompt: session/load's stream chooses SSE or
// NDJSON by the Accept header's q-values, as session/prompt does; a
// Contains test answered NDJSON to a client that prefers SSE and accepts
// NDJSON too.
func TestLoadStreamAcceptsAsPrompt(t *testing.T) {
	for accept, sse := range map[string]bool{
		"":                     false,
		"text/event-stream":    true,
		"application/x-ndjson": false,
		"text/event-stream, application/x-ndjson;q=0.5": true,
		"application/x-ndjson, text/event-stream;q=0.5": false,
		"text/event-stream, application/x-ndjson":       false,
	} {
		h := http.Header{}
		if accept != "" {
			h.Set("Accept", accept)
		}
		if got := newStream(httptest.NewRecorder(), h, 0).sse; got != sse {
			t.Errorf("Accept %q: SSE %v, want %v", accept, got, sse)
		}
	}
}
