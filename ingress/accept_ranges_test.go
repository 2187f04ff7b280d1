package ingress_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestStreamAcceptWildcardOutranksNDJSON: docs/protocols.md says /stream
// "answers NDJSON when the client ranks it at least as high as SSE, SSE
// otherwise", and egress reads wildcards as ranges (RFC 9110 §12.5.1,
// TestStreamNotAcceptable). A client that ranks NDJSON at q=0.5 and every
// other type (text/event-stream included) at q=1 ranks SSE higher, yet
// got NDJSON: streamFormat weighed only types listed by name.
func TestStreamAcceptWildcardOutranksNDJSON(t *testing.T) {
	p := startPipeline(t)
	resp := p.post(t, "/v1/requests?wait=true", "", `{"request_id":"acc-range-1","params":{"text":"hi","frames":1}}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST ?wait=true: %d", resp.StatusCode)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	for _, accept := range []string{
		"application/x-ndjson;q=0.5, */*",
		"text/*, application/x-ndjson;q=0.5",
	} {
		res := p.get(t, "/v1/requests/acc-range-1/stream", "Accept", accept)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Errorf("GET /stream Accept: %s answered %d %q, want text/event-stream (ranked q=1 by the range, NDJSON q=0.5)", accept, res.StatusCode, ct)
		}
	}
}

// TestPostAcceptWildcardOutranksNDJSON: a POST answers "SSE, NDJSON or
// the aggregated JSON, whichever the client ranks highest"
// (docs/protocols.md; Accept: */* alone answers the JSON). A client that
// ranks NDJSON at q=0.5 and anything else at q=1 ranks NDJSON lowest of
// the three, yet the POST answered an NDJSON stream: NegotiateE2A weighed
// only types listed by name, so */* counted for nothing.
func TestPostAcceptWildcardOutranksNDJSON(t *testing.T) {
	p := startPipeline(t)
	resp := p.post(t, "/v1/requests", "application/x-ndjson;q=0.5, */*", `{"request_id":"acc-range-2","params":{"text":"hi","frames":1}}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/x-ndjson") {
		t.Errorf("POST Accept: application/x-ndjson;q=0.5, */* answered %d %q: the type the client ranked lowest", resp.StatusCode, ct)
	}
}
