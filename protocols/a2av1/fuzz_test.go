package a2av1

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/normalizer"
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
			for _, kind := range []error{a2a.ErrInvalidParams, a2a.ErrInvalidRequest, a2a.ErrUnsupportedOperation, a2a.ErrPushNotificationNotSupported} {
				if errors.Is(err, kind) {
					return
				}
			}
			t.Fatalf("%q: error of an unexpected kind: %v", data, err)
		}
		if res.Envelope == nil || res.Envelope.TaskID == "" || res.Envelope.ContextID == "" || res.Op != normalizer.OpSubmit {
			t.Fatalf("%q: result %+v", data, res)
		}
		if _, err := json.Marshal(res.Envelope); err != nil {
			t.Fatalf("%q: envelope does not encode: %v", data, err)
		}
	})
}
