package ingress_test

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestResumePointOfNewRequestIgnored: a streaming call posted with
// Last-Event-ID (or ?from=) but no idempotency key, as fetch-based SSE
// clients post it again when they reconnect, is a new request: the agent
// runs again. Its stream began after the frame the client named, a frame
// of another request: the new run's first frames (the A2A Task or
// submitted event with them) were never sent. It starts at the first
// frame now, at every door that streams a new request; a duplicate (the
// same Idempotency-Key) still resumes (TestFollowedStreamResumes).
func TestResumePointOfNewRequestIgnored(t *testing.T) {
	p := startPipeline(t)
	sse := []string{"Accept", "text/event-stream"}
	resp := testkit.Open(t, "POST", p.url+"/acp", `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	var created struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&created); err != nil || created.Result.SessionID == "" {
		t.Fatalf("session/new: %v %+v", err, created)
	}
	doors := []struct{ name, path, body string }{
		{"e2a", "/v1/requests?agent=demo", `{"params":{"text":"hi","frames":4}}`},
		{"a2a-v03", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"kind":"message","role":"user",` +
			`"messageId":"%s","parts":[{"kind":"text","text":"hi"}]}}}`},
		{"agentvault", "/a2a", `{"jsonrpc":"2.0","id":"1","method":"tasks/sendSubscribe","params":{"message":{"role":"user",` +
			`"parts":[{"type":"text","content":"hi"}]}}}`},
		{"a2a-v1-rest", "/a2a/v1/message:stream", `{"message":{"role":"ROLE_USER","messageId":"%s","parts":[{"text":"hi"}]}}`},
		{"acp", "/acp", `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"` + created.Result.SessionID +
			`","prompt":[{"type":"text","text":"hi"}]}}`},
	}
	for _, d := range doors {
		t.Run(d.name, func(t *testing.T) {
			body := func(n int) string {
				if strings.Contains(d.body, "%s") {
					return fmt.Sprintf(d.body, fmt.Sprintf("m-%s-%d", d.name, n))
				}
				return d.body
			}
			whole := readSSE(t, testkit.Open(t, "POST", p.url+d.path, body(1), sse...).Body)
			if len(whole) < 4 {
				t.Fatalf("the stream without a resume point: %d events: %s", len(whole), sseLines(whole))
			}
			for i, resume := range [][]string{{"Last-Event-ID", "2"}, {"Last-Event-ID", "0"}} {
				got := readSSE(t, testkit.Open(t, "POST", p.url+d.path, body(i+2), append(resume, sse...)...).Body)
				if len(got) != len(whole) || got[0].id != whole[0].id {
					t.Errorf("a new request posted with %s %s: %d events from id %q, want the whole stream's %d from id %q:\n%s",
						resume[0], resume[1], len(got), firstID(got), len(whole), whole[0].id, sseLines(got))
				}
			}
		})
	}
	// A2E: NDJSON lines, one per event, the last the call's answer.
	t.Run("a2e", func(t *testing.T) {
		lines := func(n int, hdr ...string) []string {
			body := fmt.Sprintf(`{"a2e":"1.0","id":"c%d","type":"tool/call/req","req_id":"r-resume-%d","text":"hi"}`+"\n", n, n)
			b, err := io.ReadAll(testkit.Open(t, "POST", p.url+"/a2e", body, hdr...).Body)
			if err != nil {
				t.Fatal(err)
			}
			return strings.Split(strings.TrimSpace(string(b)), "\n")
		}
		whole := lines(1)
		if len(whole) < 4 {
			t.Fatalf("the answer without a resume point: %q", whole)
		}
		if got := lines(2, "Last-Event-ID", "2"); len(got) != len(whole) {
			t.Errorf("a new call posted with Last-Event-ID 2: %d lines, want the whole answer's %d:\n%s", len(got), len(whole), strings.Join(got, "\n"))
		}
	})
}

// firstID is the id of evs' first event, "" when none.
func firstID(evs []sseEvent) string {
	if len(evs) == 0 {
		return ""
	}
	return evs[0].id
}
