package a2aupstream_test

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
)

// TestWirePython: with WirePython the card's security requirements carry
// their scopes as StringLists ({} for none) and its interfaces no
// protocolVersion; a streaming call that fails before its first event
// (a subscription to a task the agent does not know) is answered 200
// with the JSON-RPC error as application/json, and one that has events is
// the event stream a2a-go's server writes. With a2a-go's own wire, the
// failure is an event of a stream.
func TestWirePython(t *testing.T) {
	for _, c := range []struct {
		wire       up.Wire
		failedType string
	}{{up.WirePython, "application/json"}, {up.WireGo, "text/event-stream"}} {
		t.Run(cmp.Or(string(c.wire), "go"), func(t *testing.T) {
			s := up.Start(t, up.Options{Binding: up.JSONRPC, Bearer: "tok", Wire: c.wire})
			resp, err := http.Get(s.CardURL())
			if err != nil {
				t.Fatal(err)
			}
			card := readAll(t, resp)
			resp.Body.Close()
			python := c.wire == up.WirePython
			if got := strings.Contains(card, `"schemes":{"bearer":{}}`); got != python {
				t.Errorf("card %s: scopes as {} %v, want %v", card, got, python)
			}
			if got := !strings.Contains(card, `"protocolVersion"`); got != python {
				t.Errorf("card %s: without protocolVersion %v, want %v", card, got, python)
			}

			failed := rpc(t, s, `{"jsonrpc":"2.0","id":7,"method":"SubscribeToTask","params":{"id":"no-such-task"}}`)
			body := readAll(t, failed)
			if ct := failed.Header.Get("Content-Type"); failed.StatusCode != http.StatusOK || !strings.HasPrefix(ct, c.failedType) {
				t.Errorf("subscription to an unknown task: %d %s, want 200 %s", failed.StatusCode, ct, c.failedType)
			}
			var answer struct {
				Error *struct{ Code int } `json:"error"`
			}
			if python && (json.Unmarshal([]byte(body), &answer) != nil || answer.Error == nil) {
				t.Errorf("subscription to an unknown task: %q, want a JSON-RPC error", body)
			}
			if !python && !strings.Contains(body, "data: ") {
				t.Errorf("subscription to an unknown task: %q, want an event", body)
			}

			ok := rpc(t, s, `{"jsonrpc":"2.0","id":8,"method":"SendStreamingMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"stream: w"}]}}}`)
			body = readAll(t, ok)
			if ct := ok.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") ||
				strings.Count(body, "data: ") < 4 || !strings.Contains(body, "TASK_STATE_COMPLETED") {
				t.Errorf("a stream: %s %q, want its events to the completed state", ct, body)
			}
		})
	}
}

// rpc posts a JSON-RPC call to s's interface asking for an event stream,
// with s's bearer token.
func rpc(t *testing.T, s *up.Server, body string) *http.Response {
	t.Helper()
	return postJSON(t, s.InterfaceURL(), body, http.Header{"Accept": {"text/event-stream"},
		"Authorization": {"Bearer tok"}, "A2a-Version": {"1.0"}})
}
