package ingress_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/e2a-pipeline/pipeline/protocols/a2e"
)

// TestA2EMalformedLastEventIDRefusedBeforePublish: POST /a2e read the
// HTTP request's resume point (Last-Event-ID, ?from=) only after each
// message was published (egress.Serve): a malformed Last-Event-ID
// answered every request with a non-retryable bad_request error although
// the request was published and ran. Like E2A, it is now refused before
// the publish: nothing published.
func TestA2EMalformedLastEventIDRefusedBeforePublish(t *testing.T) {
	p := startPipeline(t)
	resp, b := do(t, http.MethodPost, p.url+"/a2e", `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1","text":"hi","frames":2}`+"\n",
		"Idempotency-Key", "lei-1", "Last-Event-ID", "x")
	st, msgs := resp.StatusCode, decodeA2ELines(t, bytes.NewReader(b))
	if len(msgs) == 0 {
		t.Fatalf("status %d, no line", st)
	}
	last := msgs[len(msgs)-1]
	if st != http.StatusBadRequest || len(msgs) != 1 || last.Type != a2e.ErrorType || last.Code != "invalid_request" {
		t.Errorf("POST /a2e with Last-Event-ID x: %d %+v; want 400 and one invalid_request error line", st, msgs)
	}
	// Refused: then nothing may have been published.
	resp = p.get(t, "/v1/requests/lei-1")
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("POST /a2e answered %d with error %s (%q, retryable %v), yet the request was published: GET /v1/requests/lei-1 = %d",
			st, last.Code, last.Message, *last.Retryable, resp.StatusCode)
	}
}
