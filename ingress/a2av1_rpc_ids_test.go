package ingress_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/ingress"
)

// JSON-RPC ids and notifications at the A2A doors (session 45): JSON-RPC
// 2.0 says the response's id is the request's, and that a notification
// (a request without an id member) gets no response.

// rpcIDs are ids the A2A v1.0 SDK's transport wrote back changed (it
// decodes an id into a float64 or a Go string and encodes it again): a
// number beyond 2^53, a number written with a fraction or an exponent, and
// strings with escapes and the characters encoding/json escapes.
var rpcIDs = []string{`12345678901234567890`, `-9007199254740993`, `1.50`, `1e3`, `"<a&b>"`, `"\u00e9t\u00e9"`}

// rpcIDOf is the id member of the JSON-RPC response b, as its bytes.
func rpcIDOf(t *testing.T, what string, b []byte) string {
	t.Helper()
	var r struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.JSONRPC != "2.0" {
		t.Fatalf("%s: not a JSON-RPC response: %s (%v)", what, b, err)
	}
	return string(r.ID)
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && x == y
}

// rpcAnswers posts body to url (A2A-Version 1.0, JSON, SSE accepted) and
// returns the answer's status and its JSON-RPC responses: the body, or
// each event's data for a stream.
func rpcAnswers(t *testing.T, url, body string, hdr ...string) (int, [][]byte) {
	t.Helper()
	resp, b := do(t, http.MethodPost, url, body, append([]string{"Content-Type", "application/json", "A2A-Version", "1.0",
		"Accept", "application/json, text/event-stream"}, hdr...)...)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, [][]byte{b}
	}
	var out [][]byte
	for _, ev := range readSSE(t, bytes.NewReader(b)) {
		out = append(out, ev.data)
	}
	return resp.StatusCode, out
}

// idCall is a call TestA2ARPCIDEchoedAsWritten makes with each id: at url,
// of method with params; v03: answered by the v0.3 door.
type idCall struct {
	name, url, method, params string
	v03                       bool
}

// TestA2ARPCIDEchoedAsWritten: every answer of the A2A JSON-RPC doors (a
// result, an error, every event of a stream, on v1.0's /a2a/v1 and on
// /a2a for v0.3 and for a v1.0 call) carries the request's id byte for
// byte. A2A v1.0 wrote 12345678901234567890 back as 12345678901234567000,
// 1.50 as 1.5, "<a&b>" as "\u003ca\u0026b\u003e". v0.3's answers are
// written by package jsonrpc's encoding/json, which escapes <, > and & in
// a string id: the same string, checked by value.
func TestA2ARPCIDEchoedAsWritten(t *testing.T) {
	p := startPipeline(t)
	v1, v03 := p.url+ingress.A2AV1Path+"?agent=demo", p.url+"/a2a?agent=demo"
	msgV1 := `{"message":{"messageId":"m-ids","role":"ROLE_USER","parts":[{"text":"hi"}]}}`
	msgV03 := `{"message":{"kind":"message","role":"user","messageId":"m-ids","parts":[{"kind":"text","text":"hi"}]}}`
	calls := []idCall{
		{"v1.0 SendMessage", v1, "SendMessage", msgV1, false},
		{"v1.0 SendStreamingMessage", v1, "SendStreamingMessage", msgV1, false},
		{"v1.0 GetTask unknown", v1, "GetTask", `{"id":"no-such-task"}`, false},
		{"v1.0 SubscribeToTask unknown", v1, "SubscribeToTask", `{"id":"no-such-task"}`, false},
		{"v1.0 bad params", v1, "SendMessage", `{"message":5}`, false},
		{"v0.3 name at v1.0", v1, "tasks/get", `{"id":"no-such-task"}`, false},
		{"v1.0 at /a2a", v03, "SendStreamingMessage", msgV1, false},
		{"v0.3 message/send", v03, "message/send", msgV03, true},
		{"v0.3 message/stream", v03, "message/stream", msgV03, true},
		{"v0.3 tasks/get unknown", v03, "tasks/get", `{"id":"no-such-task"}`, true},
	}
	// A finished task, which SubscribeToTask with the replay extension
	// streams through the SDK's transport.
	_, done := rpcAnswers(t, v1, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":`+msgV1+`}`)
	var sent struct {
		Result struct{ Task struct{ ID string } }
	}
	if err := json.Unmarshal(done[0], &sent); err != nil || sent.Result.Task.ID == "" {
		t.Fatalf("SendMessage: %s", done[0])
	}
	calls = append(calls, idCall{"v1.0 SubscribeToTask replayed", v1, "SubscribeToTask", `{"id":"` + sent.Result.Task.ID + `"}`, false})
	for _, id := range rpcIDs {
		for _, c := range calls {
			body := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + c.method + `","params":` + c.params + `}`
			var hdr []string
			if c.method == "SubscribeToTask" && c.params != `{"id":"no-such-task"}` {
				hdr = []string{"A2A-Extensions", ingress.A2AReplayExtension}
			}
			status, answers := rpcAnswers(t, c.url, body, hdr...)
			if status != http.StatusOK || len(answers) == 0 {
				t.Fatalf("%s, id %s: %d with %d answers", c.name, id, status, len(answers))
			}
			for i, a := range answers {
				got := rpcIDOf(t, c.name, a)
				if c.v03 && strings.ContainsAny(id, "<>&") && sameJSON(got, id) {
					continue
				}
				if got != id {
					t.Errorf("%s: answer %d of %d has id %s, want %s as sent: %.200s", c.name, i, len(answers), got, id, a)
				}
			}
		}
	}
}

// TestA2ANotificationsNotAnswered: a call without an id member (a
// JSON-RPC notification) is run and answered 204 with no body at both A2A
// doors, as v0.3's /a2a did (v1.0 answered 200 with "id": null): a
// SendMessage or SendStreamingMessage is published (the agent's pool
// receives it). "id": null is no notification: it is answered, with id
// null. A notification that fails before it is accepted gets its error
// (id null) at both doors alike, as /a2a answers them (A2A defines no
// notifications; docs/protocols.md, Id-less requests).
func TestA2ANotificationsNotAnswered(t *testing.T) {
	p := startPipeline(t)
	sub := subscribeRequests(t, p.nc, "demo")
	v1, v03 := p.url+ingress.A2AV1Path+"?agent=demo", p.url+"/a2a?agent=demo"
	msgV1 := func(id string) string {
		return `{"message":{"messageId":"` + id + `","role":"ROLE_USER","parts":[{"text":"hi"}]}}`
	}
	for _, c := range []struct{ name, url, method, params, messageID string }{
		{"v1.0 SendMessage", v1, "SendMessage", msgV1("note-v1-send"), "note-v1-send"},
		{"v1.0 SendStreamingMessage", v1, "SendStreamingMessage", msgV1("note-v1-stream"), "note-v1-stream"},
		{"v1.0 SendMessage at /a2a", v03, "SendMessage", msgV1("note-v1-at-a2a"), "note-v1-at-a2a"},
		{"v0.3 message/send", v03, "message/send",
			`{"message":{"kind":"message","role":"user","messageId":"note-v03","parts":[{"kind":"text","text":"hi"}]}}`, "note-v03"},
		{"v1.0 ListTasks", v1, "ListTasks", `{}`, ""},
	} {
		resp, b := do(t, http.MethodPost, c.url, `{"jsonrpc":"2.0","method":"`+c.method+`","params":`+c.params+`}`,
			"Content-Type", "application/json", "A2A-Version", "1.0")
		if resp.StatusCode != http.StatusNoContent || len(b) != 0 {
			t.Errorf("%s notification: %d %q, want 204 and no body", c.name, resp.StatusCode, b)
			continue
		}
		if c.messageID == "" {
			continue
		}
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("%s notification: its request was not published: %v", c.name, err)
		}
		if !strings.Contains(string(m.Data), c.messageID) {
			t.Fatalf("%s notification: published %.300s, want message %s", c.name, m.Data, c.messageID)
		}
	}

	// "id": null is a request: answered, with id null.
	status, answers := rpcAnswers(t, v1, `{"jsonrpc":"2.0","id":null,"method":"SendMessage","params":`+msgV1("null-id")+`}`)
	if status != http.StatusOK || len(answers) != 1 || rpcIDOf(t, "id null", answers[0]) != "null" ||
		!bytes.Contains(answers[0], []byte(`"result"`)) {
		t.Errorf("SendMessage with id null: %d %q, want its result with id null", status, answers)
	}
	if _, err := sub.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("SendMessage with id null: not published: %v", err)
	}

	// A notification refused before it is accepted: its error, id null,
	// the same at both doors.
	for _, c := range []struct{ name, url, body string }{
		{"v1.0", v1, `{"jsonrpc":"2.0","method":"GetTask","params":{"id":"no-such-task"}}`},
		{"v1.0 at /a2a", v03, `{"jsonrpc":"2.0","method":"GetTask","params":{"id":"no-such-task"}}`},
		{"v0.3", v03, `{"jsonrpc":"2.0","method":"tasks/get","params":{"id":"no-such-task"}}`},
	} {
		status, answers := rpcAnswers(t, c.url, c.body)
		var r struct {
			ID    json.RawMessage
			Error *struct{ Code int }
		}
		if status != http.StatusOK || len(answers) != 1 || json.Unmarshal(answers[0], &r) != nil || r.Error == nil ||
			r.Error.Code != -32001 || string(r.ID) != "null" {
			t.Errorf("%s GetTask notification of an unknown task: %d %q, want -32001 with id null", c.name, status, answers)
		}
	}
}
