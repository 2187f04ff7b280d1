package ingress_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestV1StreamBadResumePointIsInvalidParams: an A2A v1.0
// SendStreamingMessage whose Last-Event-ID is no event id of the stream
// is the client's error: JSON-RPC -32602 (InvalidParams, the stream's one
// event), HTTP+JSON 400 INVALID_ARGUMENT (the plain error answer of a
// refusal before the stream opens), naming it. It was -32000 / 500 "the
// pipeline could not answer; retry later" (found by review), a retry that
// never helps. It is refused before anything is published, as the other
// doors refuse it: the message was published and the agent ran
// (TestA2AMalformedResumePointRefusedBeforePublish for v0.3's).
func TestV1StreamBadResumePointIsInvalidParams(t *testing.T) {
	p := startPipeline(t)
	for _, c := range []struct{ key, path, body, want string }{
		{"bad-resume-rpc", "/a2a/v1", `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"role":"ROLE_USER","messageId":"bad-resume-1","parts":[{"text":"hi"}]}}}`, `"code":-32602`},
		{"bad-resume-rest", "/a2a/v1/message:stream", `{"message":{"role":"ROLE_USER","messageId":"bad-resume-2","parts":[{"text":"hi"}]}}`, `"INVALID_ARGUMENT"`},
	} {
		key := c.key
		resp := testkit.Open(t, "POST", p.url+c.path, c.body, "Content-Type", "application/json", "Accept", "text/event-stream",
			"Last-Event-ID", "not-an-id", "Idempotency-Key", key)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		last := string(b)
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			if evs := testkit.Events(testkit.MustReadSSE(t, bytes.NewReader(b))); len(evs) > 0 {
				last = evs[len(evs)-1].Data
			}
		}
		if err != nil || !strings.Contains(last, c.want) || !strings.Contains(last, "not-an-id") || !json.Valid([]byte(last)) {
			t.Errorf("%s with Last-Event-ID not-an-id: %d, answer %s, want %s naming it", c.path, resp.StatusCode, last, c.want)
		}
		resp = p.get(t, "/v1/requests/"+key)
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: refused, yet published: GET /v1/requests/%s = %d", c.path, key, resp.StatusCode)
		}
	}
}
