package ingress_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/protocols/a2e"
)

// postA2ELines posts body to /a2e with the headers hdr and returns the
// status and the A2E messages of the answer.
func postA2ELines(t *testing.T, p *pipeline, hdr map[string]string, body string) (int, []a2e.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/a2e", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out []a2e.Message
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var m a2e.Message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return resp.StatusCode, out
}

// TestA2EMalformedLastEventIDRefusedBeforePublish: POST /a2e read the
// HTTP request's resume point (Last-Event-ID, ?from=) only after each
// message was published (egress.Serve): a malformed Last-Event-ID
// answered every request with a non-retryable bad_request error although
// the request was published and ran. Like E2A, it is now refused before
// the publish: nothing published.
func TestA2EMalformedLastEventIDRefusedBeforePublish(t *testing.T) {
	p := startPipeline(t)
	st, msgs := postA2ELines(t, p, map[string]string{"Idempotency-Key": "lei-1", "Last-Event-ID": "x"},
		`{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1","text":"hi","frames":2}`+"\n")
	if len(msgs) == 0 {
		t.Fatalf("status %d, no line", st)
	}
	last := msgs[len(msgs)-1]
	if st != http.StatusBadRequest || len(msgs) != 1 || last.Type != a2e.ErrorType || last.Code != "invalid_request" {
		t.Errorf("POST /a2e with Last-Event-ID x: %d %+v; want 400 and one invalid_request error line", st, msgs)
	}
	// Refused: then nothing may have been published.
	resp := p.get(t, "/v1/requests/lei-1")
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("POST /a2e answered %d with error %s (%q, retryable %v), yet the request was published: GET /v1/requests/lei-1 = %d",
			st, last.Code, last.Message, *last.Retryable, resp.StatusCode)
	}
}
