package a2abridge_test

import (
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestStatusPartMetadataScrubbed: a status message's part is written
// (writeNative) with its metadata: a debugging agent that puts the
// request's headers in a part's metadata (A2A Part.metadata) published the
// bridge's key to E2A_RESPONSES and every client (found by review of
// 94a7cdd, which scrubbed the data only).
func TestStatusPartMetadataScrubbed(t *testing.T) {
	const key = "sk-a2a-review-s31c-52e0ab"
	cases := map[string]func(auth string) []*a2a.Message{
		"data part metadata": func(auth string) []*a2a.Message {
			p := a2a.NewDataPart(map[string]any{"step": "calling the backend"})
			p.Metadata = map[string]any{"request_headers": map[string]any{"Authorization": auth}}
			return []*a2a.Message{a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("calling the backend; "), p)}
		},
	}
	for name, status := range cases {
		t.Run(name, func(t *testing.T) {
			base := serveA2A(t, a2asrv.NewHandler(statusQuoter{status: status}))
			p := pipetest.Start(t)
			credPool(t, p, "quote", base, bridge.Credentials{APIKey: key}, &testkit.Buffer{})
			a := p.Ask(t, "quote", `{"params":{"text":"hi"}}`)
			if f := a.Final(); f == nil || !strings.Contains(a.Text("text"), "done") {
				t.Fatalf("the answer did not end with the agent's text: final %+v", f)
			}
			if n := natstest.StoredWith(t, p.JS, key, streams.ResponsesStream); n > 0 {
				t.Errorf("the bridge's API key is stored in %d messages of E2A_RESPONSES (%s of a working status message quoting "+
					"the Authorization header); want the status message scrubbed as a whole, its parts' metadata too", n, name)
			}
			for i, f := range a.Frames {
				if strings.Contains(string(f.Body), key) {
					t.Errorf("frame %d (%s) holds the bridge's API key: %s", i, f.ResponseKind, f.Body)
				}
			}
		})
	}
}
