package a2av1_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
)

// TestClientMessagesSpeakA2A: what a client reads of a refused A2A v1.0
// call, on the JSON-RPC and HTTP+JSON bindings, plain or streamed, says
// what was wrong once, without the pipeline's package prefixes
// ("normalizer a2a \"message/send\": …", "ingress: ", "host: ") or Go
// types; codes and statuses stay the SDK's.
func TestClientMessagesSpeakA2A(t *testing.T) {
	p := echoPipeline(t)
	const empty = `{"message":{"role":"ROLE_USER","messageId":"m-cm1","parts":[]}}`
	const badPool = `{"tenant":"a.b","message":{"role":"ROLE_USER","messageId":"m-cm2","parts":[{"text":"hi"}]}}`
	rpc := func(method, params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	}
	for _, c := range []struct {
		name, route, body, code string
		says                    []string
	}{
		{"rpc empty parts", "", rpc("SendMessage", empty), "INVALID_PARAMS", []string{"parts", "empty"}},
		{"rpc stream empty parts", "", rpc("SendStreamingMessage", empty), "INVALID_PARAMS", []string{"parts", "empty"}},
		{"rest empty parts", "/message:send", empty, "INVALID_PARAMS", []string{"parts", "empty"}},
		{"rest stream empty parts", "/message:stream", empty, "INVALID_PARAMS", []string{"parts", "empty"}},
		{"rpc invalid pool", "", rpc("SendMessage", badPool), "INVALID_PARAMS", []string{"a.b", "invalid agent pool"}},
		{"rpc stream invalid pool", "", rpc("SendStreamingMessage", badPool), "INVALID_PARAMS", []string{"a.b", "invalid agent pool"}},
		{"rpc get invalid pool", "", rpc("GetTask", `{"tenant":"a.b","id":"t-1"}`), "INVALID_PARAMS", []string{"a.b", "invalid agent pool"}},
	} {
		_, _, body := rawCall(t, "POST", p.URL+a2av1.Path+c.route, c.body, map[string]string{"A2A-Version": "1.0"})
		line := body
		if i := strings.Index(body, "data: "); i >= 0 && !strings.HasPrefix(body, "{") {
			line, _, _ = strings.Cut(body[i+len("data: "):], "\n") // a stream: its first event
		}
		var a struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(line), &a) != nil || a.Error.Message == "" || !strings.Contains(line, c.code) {
			t.Errorf("%s: answered %.400s; want an error %s", c.name, body, c.code)
			continue
		}
		m := a.Error.Message
		t.Logf("%s: %s", c.name, m)
		for _, bad := range []string{"normalizer ", "egress:", "ingress:", "host:", "subjects:", "json:", "Go value", "Go struct", "map[string]",
			"invalid params: invalid params", "invalid agent pool: invalid agent pool"} {
			if strings.Contains(m, bad) {
				t.Errorf("%s: message %q has %q", c.name, m, bad)
			}
		}
		for _, s := range c.says {
			if !strings.Contains(m, s) {
				t.Errorf("%s: message %q does not say %q", c.name, m, s)
			}
		}
	}
}
