package ingress_test

import (
	"encoding/json"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestA2AErrorCodes: the A2A v0.3 error codes of the methods and params
// the pipeline refuses, each echoing the request's id.
func TestA2AErrorCodes(t *testing.T) {
	_, nc := natstest.RunServer(t)
	url := frontDoor(t, nc)
	for _, tc := range []struct {
		name, body string
		code       int
	}{
		{"push_set", `{"jsonrpc":"2.0","id":"p1","method":"tasks/pushNotificationConfig/set","params":{"taskId":"t","pushNotificationConfig":{"url":"https://x"}}}`, -32003},
		{"push_get", `{"jsonrpc":"2.0","id":"p1","method":"tasks/pushNotificationConfig/get","params":{"id":"t"}}`, -32003},
		{"push_list", `{"jsonrpc":"2.0","id":"p1","method":"tasks/pushNotificationConfig/list","params":{"id":"t"}}`, -32003},
		{"push_delete", `{"jsonrpc":"2.0","id":"p1","method":"tasks/pushNotificationConfig/delete","params":{"id":"t","pushNotificationConfigId":"c"}}`, -32003},
		{"history_negative_get", `{"jsonrpc":"2.0","id":"p1","method":"tasks/get","params":{"id":"t","historyLength":-1}}`, -32602},
		{"history_negative_send", `{"jsonrpc":"2.0","id":"p1","method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m","parts":[{"kind":"text","text":"x"}]},"configuration":{"historyLength":-1}}}`, -32602},
		// A2A v0.3's JSON is not ProtoJSON (its schema's integers are
		// numbers): a string stays refused, as the v1.0 door now takes it.
		{"history_string_get", `{"jsonrpc":"2.0","id":"p1","method":"tasks/get","params":{"id":"t","historyLength":"1"}}`, -32602},
		{"file_pdf", `{"jsonrpc":"2.0","id":"p1","method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m","parts":[{"kind":"file","file":{"uri":"https://example.com/a.pdf","mimeType":"application/pdf"}}]}}}`, -32005},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, b := do(t, "POST", url+"/a2a", tc.body, "Content-Type", "application/json")
			var r struct {
				ID    json.RawMessage
				Error *struct{ Code int }
			}
			if err := json.Unmarshal(b, &r); err != nil || r.Error == nil || r.Error.Code != tc.code || string(r.ID) != `"p1"` {
				t.Fatalf("answer %s, want code %d with id \"p1\"", b, tc.code)
			}
		})
	}
}

// TestA2AAuthRefusalEchoesID: an unauthenticated /a2a request is refused
// with the request's id when it could be read, null otherwise.
func TestA2AAuthRefusalEchoesID(t *testing.T) {
	_, nc := natstest.RunServer(t)
	url := frontDoor(t, nc, withAPIKey(t))
	for body, want := range map[string]string{
		`{"jsonrpc":"2.0","id":"req-7","method":"message/send","params":{}}`: `"req-7"`,
		`{"jsonrpc":"2.0","id":42,"method":"tasks/get","params":{"id":"t"}}`: `42`,
		`{"jsonrpc":"2.0","id":{"x":1},"method":"tasks/get"}`:                `null`,
		`not json`: `null`,
		`[{"jsonrpc":"2.0","id":1,"method":"tasks/get"}]`: `null`,
	} {
		resp, b := do(t, "POST", url+"/a2a", body, "Content-Type", "application/json", "X-Api-Key", "wrong")
		var r struct {
			ID    json.RawMessage
			Error *struct{ Code int }
		}
		if resp.StatusCode != 401 || json.Unmarshal(b, &r) != nil || r.Error == nil || string(r.ID) != want {
			t.Errorf("%s: %d %s, want id %s", body, resp.StatusCode, b, want)
		}
	}
}
