package console_test

import (
	"strings"
	"testing"
)

// TestBadQuerySpeaksToTheClient: a list query the console refuses is
// answered 400 bad_request saying what was wrong, without the package's
// prefix ("console: bad query: …").
func TestBadQuerySpeaksToTheClient(t *testing.T) {
	p := startPipeline(t, pipelineOptions{})
	for query, says := range map[string]string{
		"status=nope": `status "nope"`, "since=yesterday": `"yesterday"`, "before=x": `before="x"`, "limit=0": `limit="0"`,
		"since=1h&until=2h": "until before since",
	} {
		resp, b := p.do(t, "GET", "/console/api/requests?"+query, "")
		code, m := consoleError(b)
		if resp.StatusCode != 400 || code != "bad_request" || !strings.Contains(m, says) || !strings.HasPrefix(m, "bad query: ") {
			t.Errorf("%s: %d %s; want 400 bad_request, a bad query saying %s", query, resp.StatusCode, b, says)
		}
		if strings.Contains(m, "console:") {
			t.Errorf("%s: message %q has the package's prefix", query, m)
		}
	}
}
