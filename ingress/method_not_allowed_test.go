package ingress_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// curlLike sends what curl sends for `curl [-X method] url [-d body] [-H …]`
// (-d: Content-Type application/x-www-form-urlencoded; Accept */*).
func curlLike(t *testing.T, method, url, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Accept", "*/*")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestStream405AllowsHEAD: the README's endpoint table says
// `GET /v1/requests/{id}/stream` also takes HEAD ("`HEAD` answers the head
// alone"), and it does; but a wrong method there was answered 405 with
// `Allow: GET`, which RFC 9110 §15.5.6 requires to list every method the
// resource supports: a client (or proxy) reading Allow never tried HEAD.
func TestStream405AllowsHEAD(t *testing.T) {
	p := pipetest.Start(t)
	p.Pool("demo", demo.New())
	if c, _, b := curlLike(t, "POST", p.URL+"/v1/requests?wait=true", `{"request_id":"zz-head-1","params":{"text":"hi","frames":1}}`); c != http.StatusOK {
		t.Fatalf("POST ?wait=true: %d %.300s", c, b)
	}
	if c, _, _ := curlLike(t, "HEAD", p.URL+"/v1/requests/zz-head-1/stream", ""); c != http.StatusOK {
		t.Fatalf("HEAD /stream: %d, the README says HEAD answers the head", c)
	}
	c, h, b := curlLike(t, "POST", p.URL+"/v1/requests/zz-head-1/stream", "")
	if c != http.StatusMethodNotAllowed {
		t.Fatalf("POST /stream: %d %.300s", c, b)
	}
	allow := map[string]bool{}
	for _, m := range strings.Split(h.Get("Allow"), ",") {
		allow[strings.TrimSpace(m)] = true
	}
	if !allow["GET"] || !allow["HEAD"] {
		t.Errorf("405 on /v1/requests/{id}/stream: Allow %q, want GET and HEAD (HEAD is served there)", h.Get("Allow"))
	}
}

// TestV1RESTWrongMethodErrorShape: the README's endpoint table
// says the A2A v1.0 HTTP+JSON binding answers errors as
// {"error":{"code","status","message","details"}} with the HTTP status. A
// wrong method on one of its paths (DELETE /a2a/v1/message:send) was 405
// in text/plain ("Method Not Allowed", the SDK's ServeMux), not that shape;
// every other front door (E2A, /a2a, /a2a/v1 JSON-RPC, /acp, /a2e) answers
// its 405 in its own JSON error shape.
func TestV1RESTWrongMethodErrorShape(t *testing.T) {
	p := pipetest.Start(t)
	p.Pool("demo", demo.New())
	for _, c := range []struct{ method, path string }{
		{"DELETE", "/a2a/v1/message:send"},
		{"GET", "/a2a/v1/message:stream"},
	} {
		code, h, b := curlLike(t, c.method, p.URL+c.path, "")
		if code != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d, want 405", c.method, c.path, code)
			continue
		}
		var e struct {
			Error *struct {
				Code    int    `json:"code"`
				Status  string `json:"status"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if !strings.HasPrefix(h.Get("Content-Type"), "application/json") || json.Unmarshal([]byte(b), &e) != nil || e.Error == nil ||
			e.Error.Code != http.StatusMethodNotAllowed || e.Error.Status == "" || e.Error.Message == "" {
			t.Errorf("%s %s: 405 %q %q, want the binding's {\"error\":{\"code\":405,\"status\",\"message\",\"details\"}}",
				c.method, c.path, h.Get("Content-Type"), b)
		}
	}
}

// TestWorkflowAPI405AllowsHEAD: the A2E workflow API's GET routes
// (/health, /api/v1/capabilities, /api/v1/executions/{id},
// /api/v1/rate-limit/status) answer HEAD (the router serves a GET
// pattern's HEAD), but a wrong method there was 405 with `Allow: GET`
// alone, which RFC 9110 §15.5.6 requires to list every method the resource
// supports (as TestStream405AllowsHEAD requires of egress's paths).
func TestWorkflowAPI405AllowsHEAD(t *testing.T) {
	_, nc := natstest.RunServer(t)
	url := frontDoor(t, nc, ingress.WithWorkflow(workflow.New(workflow.Options{})))
	for _, path := range []string{"/health", "/api/v1/capabilities", "/api/v1/executions/x", "/api/v1/rate-limit/status"} {
		if c, _, b := curlLike(t, "HEAD", url+path, ""); c == http.StatusMethodNotAllowed {
			t.Fatalf("HEAD %s: %d %s, want it served", path, c, b)
		}
		c, h, b := curlLike(t, "PUT", url+path, "{}")
		if c != http.StatusMethodNotAllowed {
			t.Fatalf("PUT %s: %d %.300s", path, c, b)
		}
		if allow := strings.Split(h.Get("Allow"), ", "); !slices.Contains(allow, "GET") || !slices.Contains(allow, "HEAD") {
			t.Errorf("405 on %s: Allow %q, want GET and HEAD (HEAD is served there)", path, h.Get("Allow"))
		}
	}
	// A POST route's Allow is POST alone.
	if c, h, _ := curlLike(t, "GET", url+"/api/v1/workflows/execute", ""); c != http.StatusMethodNotAllowed || h.Get("Allow") != "POST" {
		t.Errorf("GET /api/v1/workflows/execute: %d Allow %q, want 405 POST", c, h.Get("Allow"))
	}
}
