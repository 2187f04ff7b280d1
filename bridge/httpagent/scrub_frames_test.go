package httpagent_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestJSONRPCErrorFrameScrubbed: an HTTP agent that ends its answer with
// a final acp.jsonrpc_error frame (a failed kind the package passes
// through, like e2a.error) quoting the request's Authorization header
// does not get the bridge's API key to the client or E2A_RESPONSES: the
// Handler scrubs every error and final frame, not only e2a.error ones.
func TestJSONRPCErrorFrameScrubbed(t *testing.T) {
	t.Parallel()
	const key = "sk-jsonrpc-err-9a1b"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		msg, _ := json.Marshal("credentials refused: " + r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintf(w, `{"response_kind":"acp.jsonrpc_error","body":{"code":-32000,"message":%s}}`+"\n", msg)
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, srv.URL, rigConfig{client: []bridge.ClientOption{bridge.WithCredentials(bridge.Credentials{APIKey: key})}})
	frames := r.ask(t, `{"request_id":"jrpc-scrub-1","params":{"text":"hi"}}`)
	last := frames[len(frames)-1]
	if last.ResponseKind != e2a.KindACPJSONRPCErr {
		t.Fatalf("final %s %s", last.ResponseKind, last.Body)
	}
	if strings.Contains(string(last.Body), key) || !strings.Contains(string(last.Body), "credentials refused: Bearer [redacted]") {
		t.Errorf("the client's final frame: %s, want the message with the key redacted", last.Body)
	}
	if n := natstest.StoredWith(t, r.p.JS, key, streams.ResponsesStream); n > 0 {
		t.Errorf("the bridge's API key is stored in %d messages of E2A_RESPONSES", n)
	}
}

// TestFrameMetadataScrubbed: an HTTP agent ends its answer with
// an e2a.complete frame whose metadata member (which the package passes
// through as the frame's metadata) quotes the request's Authorization
// header, as a debugging agent echoing what it received does. The package
// documentation: "The bridge's credentials are taken out of every frame but
// the answer's streamed content (... final frames ...)"; docs/security.md:
// the upstream credentials are "sent to the upstream only". The key must
// not reach the client's final frame or E2A_RESPONSES.
func TestFrameMetadataScrubbed(t *testing.T) {
	t.Parallel()
	const key = "sk-frame-meta-3c7e91"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = mustRead(r)
		echo, _ := json.Marshal(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintf(w, `{"response_kind":"e2a.complete","metadata":{"received_authorization":%s},"body":{"result":{"text":"done"}}}`+"\n", echo)
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, srv.URL, rigConfig{client: []bridge.ClientOption{bridge.WithCredentials(bridge.Credentials{APIKey: key})}})
	frames := r.ask(t, `{"request_id":"meta-scrub-1","params":{"text":"hi"}}`)
	last := frames[len(frames)-1]
	if last.ResponseKind != e2a.KindComplete {
		t.Fatalf("final %s %s", last.ResponseKind, last.Body)
	}
	if b, _ := json.Marshal(last.Metadata); strings.Contains(string(b), key) {
		t.Errorf("the client's final frame carries the bridge's API key in its metadata: %s; want it redacted", b)
	}
	if n := natstest.StoredWith(t, r.p.JS, key, streams.ResponsesStream); n > 0 {
		t.Errorf("the bridge's API key is stored in %d messages of E2A_RESPONSES; want none", n)
	}
}
