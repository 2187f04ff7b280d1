package ingress_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestV1StreamBadResumePointIsInvalidParams: an A2A v1.0
// SendStreamingMessage whose Last-Event-ID is no event id of the stream
// is the client's error: JSON-RPC -32602 (InvalidParams), HTTP+JSON 400
// INVALID_ARGUMENT, naming it. It was -32000 / 500 "the pipeline could not
// answer; retry later" (found by review), a retry that never helps.
func TestV1StreamBadResumePointIsInvalidParams(t *testing.T) {
	p := startPipeline(t)
	for _, c := range []struct{ path, body, want string }{
		{"/a2a/v1", `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"role":"ROLE_USER","messageId":"bad-resume-1","parts":[{"text":"hi"}]}}}`, `"code":-32602`},
		{"/a2a/v1/message:stream", `{"message":{"role":"ROLE_USER","messageId":"bad-resume-2","parts":[{"text":"hi"}]}}`, `"INVALID_ARGUMENT"`},
	} {
		resp := testkit.Open(t, "POST", p.url+c.path, c.body, "Content-Type", "application/json", "Accept", "text/event-stream",
			"Last-Event-ID", "not-an-id")
		evs := readSSE(t, resp.Body)
		resp.Body.Close()
		var last string
		if len(evs) > 0 {
			last = string(evs[len(evs)-1].data)
		}
		if !strings.Contains(last, c.want) || !strings.Contains(last, "not-an-id") || !json.Valid([]byte(last)) {
			t.Errorf("%s with Last-Event-ID not-an-id: last event %s, want %s naming it", c.path, last, c.want)
		}
	}
}
