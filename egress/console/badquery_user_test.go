package console_test

import (
	"net/http"
	"testing"
)

// TestBadQueryRefusedWhateverTheUser: a list query with a bad parameter is
// 400 bad_request whichever user it filters on. Filtered on another
// principal (?user=bob, asked by alice), it was answered 200 with an empty
// page before the query was checked: an unknown status or an until before
// since passed as a search that found nothing.
func TestBadQueryRefusedWhateverTheUser(t *testing.T) {
	p := startPipeline(t, pipelineOptions{auth: true, noAgent: true})
	for _, user := range []string{"alice", "bob"} {
		for _, bad := range []string{"status=nope", "since=1h&until=2h"} {
			path := "/console/api/requests?user=" + user + "&" + bad
			resp, b := p.do(t, "GET", path, "", "X-Api-Key", keyAlice)
			if code, _ := consoleError(b); resp.StatusCode != http.StatusBadRequest || code != "bad_request" {
				t.Errorf("alice GET %s: %d %s, want 400 bad_request", path, resp.StatusCode, b)
			}
		}
	}
}
