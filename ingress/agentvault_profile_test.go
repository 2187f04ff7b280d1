package ingress_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// avPost posts an AgentVault JSON-RPC body to the pipeline's /a2a with the
// profile's headers (Content-Type application/json; hdr more, Accept say).
func avPost(t *testing.T, url, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return testkit.Do(t, http.MethodPost, url+"/a2a", body, append([]string{"Content-Type", "application/json"}, hdr...)...)
}

// avSend starts an AgentVault task with tasks/send of text (metadata: the
// message's metadata, JSON or "") and returns its id.
func avSend(t *testing.T, url, text, metadata string) string {
	t.Helper()
	meta := ""
	if metadata != "" {
		meta = `,"metadata":` + metadata
	}
	_, b := avPost(t, url, `{"jsonrpc":"2.0","id":"start","method":"tasks/send","params":{"message":{"role":"user","parts":[{"type":"text","content":`+
		strings.TrimSpace(mustJSON(t, text))+`}]`+meta+`}}}`)
	var out struct{ Result struct{ ID string } }
	if err := json.Unmarshal(b, &out); err != nil || out.Result.ID == "" {
		t.Fatalf("tasks/send: %s (%v)", b, err)
	}
	return out.Result.ID
}

// avAwaitState waits until tasks/get of task id answers state.
func avAwaitState(t *testing.T, url, id, state string) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, "AgentVault task "+id+" "+state, func() bool {
		_, b := avPost(t, url, `{"jsonrpc":"2.0","id":"poll","method":"tasks/get","params":{"id":"`+id+`"}}`)
		var out struct{ Result struct{ State string } }
		_ = json.Unmarshal(b, &out)
		return out.Result.State == state
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAgentVaultNotificationsGetNoReply: an AgentVault call without an id
// is a notification, and the profile's server "MUST NOT reply" to it
// (a2a-agentvault-profile.md, JSON-RPC 2.0 Structure), failing or not:
// the HTTP exchange ends with 204 and no body. The endpoint answered a
// failing one with a JSON-RPC error (id null), as it does A2A's, which
// defines no notifications.
func TestAgentVaultNotificationsGetNoReply(t *testing.T) {
	p := pipetest.Start(t)
	p.Pool(demo.Pool, demo.New())
	done := avSend(t, p.URL, "hello", "")
	avAwaitState(t, p.URL, done, "COMPLETED")
	for name, c := range map[string]struct{ body, accept string }{
		"tasks/send, bad params": {body: `{"jsonrpc":"2.0","method":"tasks/send","params":{"message":{"role":"user","parts":[]}}}`},
		"tasks/send, unknown task": {body: `{"jsonrpc":"2.0","method":"tasks/send","params":{"id":"no-such-task",` +
			`"message":{"role":"user","parts":[{"type":"text","content":"x"}]}}}`},
		"tasks/sendSubscribe, unknown task": {body: `{"jsonrpc":"2.0","method":"tasks/sendSubscribe","params":{"id":"no-such-task"}}`,
			accept: "text/event-stream"},
		"tasks/cancel, final task": {body: `{"jsonrpc":"2.0","method":"tasks/cancel","params":{"id":"` + done + `"}}`},
		"tasks/get, own task":      {body: `{"jsonrpc":"2.0","method":"tasks/get","params":{"id":"` + done + `"}}`},
	} {
		hdr := []string{}
		if c.accept != "" {
			hdr = append(hdr, "Accept", c.accept)
		}
		resp, b := avPost(t, p.URL, c.body, hdr...)
		if resp.StatusCode != http.StatusNoContent || len(b) != 0 {
			t.Errorf("%s: %d %s; a notification gets no reply (204, no body)", name, resp.StatusCode, b)
		}
	}
}
