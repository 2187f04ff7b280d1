package console_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestConsoleQueryRefused: a console API query that is no URL-encoded form
// (an escape that is none, a semicolon between parameters), or that gives
// a parameter twice with different values, is 400 bad_request, as ingress
// refuses it at every door and on the read API. Its unreadable pairs were
// dropped (?status=fai%zzled listed every status, ?until=%zz had no
// bound, ?from=%zz streamed from frame 0), and of a parameter given twice
// the first value was read.
func TestConsoleQueryRefused(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true})
	for _, c := range []struct{ path, says string }{
		{"/console/api/requests?status=fai%zzled", `invalid URL escape "%zz"`},
		{"/console/api/requests?until=%zz", `invalid URL escape "%zz"`},
		{"/console/api/requests?task=a;b", "semicolon"},
		{"/console/api/requests?status=failed&status=succeeded", `query parameter "status" is given twice with different values`},
		{"/console/api/requests?user=alice&user=bob", `query parameter "user" is given twice`},
		{"/console/api/request?id=a&id=b", `query parameter "id" is given twice`},
		{"/console/api/request/stream?id=req-1&from=%zz", `invalid URL escape "%zz"`},
		{"/console/api/requests/req-1/stream?from=1&from=5", `query parameter "from" is given twice`},
		{"/console/api/session?x=%zz", `invalid URL escape "%zz"`},
	} {
		resp, b := p.do(t, "GET", c.path, "", "X-Api-Key", keyAlice, "Accept", "text/event-stream")
		if code, msg := consoleError(b); resp.StatusCode != http.StatusBadRequest || code != "bad_request" || !strings.Contains(msg, c.says) {
			t.Errorf("GET %s: %d %s, want 400 bad_request saying %s", c.path, resp.StatusCode, b, c.says)
		}
	}
	// A parameter given twice with one value is one value.
	if resp, b := p.do(t, "GET", "/console/api/requests?status=failed&status=failed", "", "X-Api-Key", keyAlice); resp.StatusCode != http.StatusOK {
		t.Errorf("?status=failed&status=failed: %d %s, want 200", resp.StatusCode, b)
	}
}
