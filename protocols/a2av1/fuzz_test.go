package a2av1

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/normalizer"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

// FuzzNormalizeV1Send: whatever SendMessage body the SDK's transports
// decode, reading it into an envelope never panics and gives either an
// envelope with its task and context ids that encodes, or an error of the
// kinds the SDK answers as a client's mistake (never an internal error).
func FuzzNormalizeV1Send(f *testing.F) {
	for _, s := range []string{
		// The specification's examples (§6.1, §6.2) and their variations.
		`{"message":{"role":"ROLE_USER","parts":[{"text":"What is the weather today?"}],"messageId":"msg-uuid"}}`,
		`{"message":{"role":"ROLE_USER","parts":[{"text":"Write a detailed report on climate change"}],"messageId":"msg-uuid"}}`,
		`{"message":{"role":"ROLE_USER","parts":[{"data":{"a":1}},{"url":"https://x.example/f","mediaType":"text/plain"},{"raw":"aGk="}],"messageId":"m","taskId":"t","contextId":"c"},"configuration":{"historyLength":2,"returnImmediately":true},"metadata":{"k":"v"}}`,
		`{"message":{"role":"ROLE_AGENT","parts":[{"text":""}],"messageId":""}}`,
		`{"message":{"role":"ROLE_USER","parts":[{"text":"x","metadata":{"thought":true}}],"messageId":"m","metadata":{"interaction_spec_version":"0.1","delay_ms":5}}}`,
		`{"message":{"role":"ROLE_USER","parts":[],"messageId":"m"}}`,
		`{"message":null}`, `null`, `{"message":{"parts":[{}]}}`, `{"configuration":{"acceptedOutputModes":["text/plain"]}}`,
		// A null part, which JSON decodes to a nil *Part: the SDK's v0.3
		// conversion dereferenced it, a panic that dropped the connection.
		`{"message":{"role":"ROLE_USER","parts":[{"text":"a"},null],"messageId":"m"}}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	n := normalizer.New(normalizer.Config{})
	now := func() time.Time { return time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC) }
	f.Fuzz(func(t *testing.T, data []byte, streaming bool) {
		var req a2a.SendMessageRequest
		if json.Unmarshal(data, &req) != nil {
			return // the SDK's transport answers its own parse error
		}
		method := normalizer.A2AMessageSend
		if streaming {
			method = normalizer.A2AMessageStream
		}
		res, err := normalizeSend(n, normalizer.Input{Channel: "http", Now: now}, &req, method)
		if err != nil {
			for _, kind := range []error{a2a.ErrInvalidParams, a2a.ErrInvalidRequest, a2a.ErrUnsupportedOperation, a2a.ErrPushNotificationNotSupported, a2a.ErrUnsupportedContentType} {
				if errors.Is(err, kind) {
					return
				}
			}
			t.Fatalf("%q: error of an unexpected kind: %v", data, err)
		}
		if res.Envelope == nil || res.Envelope.TaskID == "" || res.Op != normalizer.OpSubmit {
			t.Fatalf("%q: result %+v", data, res)
		}
		// A new task gets a context; a continued one keeps the message's,
		// and without one its task's, which submit reads from the task's
		// record (handler.go), not the adapter.
		if env := res.Envelope; a2aproto.Continued(env) && env.ContextID != req.Message.ContextID ||
			!a2aproto.Continued(env) && env.ContextID == "" {
			t.Fatalf("%q: task %q, context %q (continued %v)", data, env.TaskID, env.ContextID, a2aproto.Continued(env))
		}
		if _, err := json.Marshal(res.Envelope); err != nil {
			t.Fatalf("%q: envelope does not encode: %v", data, err)
		}
	})
}

// FuzzStreamBindings: whatever body a caller posts to the JSON-RPC
// binding, or to the HTTP+JSON binding's message:stream, the binding
// (checkCall, the SendStreamingMessage it streams with egress, the SDK
// for the rest) never panics, publishes at most one request, hands a
// stream to egress only for a request it published, and answers well-formed:
// SSE whose every data: is one JSON value, or one JSON value, or nothing
// (204) to a notification.
func FuzzStreamBindings(f *testing.F) {
	msg := `{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"hi"}]}}`
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":"s-1","method":"SendStreamingMessage","params":` + msg + `}`,
		`{"jsonrpc":"2.0","id":7,"method":"SendStreamingMessage","params":` + msg + `}`,
		`{"jsonrpc":"2.0","id":-1.5e3,"method":"SendStreamingMessage","params":` + msg + `}`,
		`{"jsonrpc":"2.0","method":"SendStreamingMessage","params":` + msg + `}`,
		`{"jsonrpc":"2.0","id":null,"method":"SendStreamingMessage","params":` + msg + `}`,
		`{"jsonrpc":"2.0","id":"x","method":"SendStreamingMessage","params":{"message":5}}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"SendStreamingMessage","params":` + msg + `}`,
		`{"jsonrpc":"1.0","id":1,"method":"SendStreamingMessage","params":` + msg + `}`,
		`{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"m","taskId":"t-9","role":"ROLE_USER","parts":[{"text":"x"}]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage"}]`,
		`{"jsonrpc":"2.0","id":"\u003c\u2028","method":"SendStreamingMessage","params":` + msg + `} trailing`,
		msg, `{"message":5`, ``, `null`,
		// ProtoJSON's other forms (protoJSONNumbers): an enum by number,
		// an integer as a string, and what it refuses.
		`{"jsonrpc":"2.0","id":2,"method":"SendStreamingMessage","params":{"message":{"messageId":"m","role":1,"parts":[{"text":"x"}]},"configuration":{"historyLength":"2"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"SendStreamingMessage","params":{"message":{"messageId":"m","role":9,"parts":[{"text":"x"}]},"configuration":{"historyLength":"2.5"}}}`,
		`{"message":{"messageId":"m","role":2.0,"parts":[{"text":"x"}]},"configuration":{"history_length":"1e0"}}`,
		`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"\u0041"}]},"configuration":{"historyLength":"9999999999"}}`,
		// Proto field names (protoJSON), on both bindings, and a
		// member by both its names (refused).
		`{"message":{"message_id":"m","context_id":"c","role":"ROLE_USER","parts":[{"text":"x","media_type":"text/plain"}]},"configuration":{"history_length":1,"accepted_output_modes":["text/plain"]}}`,
		`{"jsonrpc":"2.0","id":4,"method":"SendStreamingMessage","params":{"message":{"message_id":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}}`,
		`{"message":{"message_id":"m","messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}`,
		`{"jsonrpc":"2.0","id":5,"method":"SendStreamingMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"history_length":1,"historyLength":1}}}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, rest bool) {
		fh := servingHost()
		b := Bindings(fh)
		h, path := b.JSONRPC, Path
		if rest {
			h, path = b.REST, restStreamPath
		}
		r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		r.Header.Set("X-Api-Key", "k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if pub, served := fh.Published(), fh.Served(); len(pub) > 1 || len(served) > len(pub) {
			t.Fatalf("%q: %d published, %d streams served", body, len(pub), len(served))
		}
		out := w.Body.Bytes()
		if w.Code == http.StatusNoContent {
			// A notification (no id member) that was run: no answer.
			var head rpcHead
			if rest || len(out) != 0 || json.Unmarshal(body, &head) != nil || !head.notification() {
				t.Fatalf("%q: 204 with %q", body, out)
			}
			return
		}
		if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
			data, err := conformance.SSEData(out)
			if err != nil {
				t.Fatalf("%q: %v:\n%s", body, err, out)
			}
			for _, d := range data {
				if !json.Valid(d) {
					t.Fatalf("%q: data is not JSON: %s", body, d)
				}
			}
			return
		}
		if !json.Valid(bytes.TrimSpace(out)) {
			t.Fatalf("%q: answer is not JSON: %s", body, out)
		}
	})
}
