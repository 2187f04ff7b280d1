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
// types; codes and statuses stay the SDK's. A member of the wrong JSON
// type is named by its path and the JSON types (the SDK's message named
// Go's: "cannot unmarshal string into Go struct field
// Message.message.parts of type []*a2a.Part"), Invalid params on every
// binding: HTTP+JSON answered such a body, valid JSON, PARSE_ERROR
// (A2A v1.0 §3.3.2: a validation error; -32700 is invalid JSON, which
// stays a parse error on message:send and message:stream alike).
func TestClientMessagesSpeakA2A(t *testing.T) {
	p := echoPipeline(t)
	const empty = `{"message":{"role":"ROLE_USER","messageId":"m-cm1","parts":[]}}`
	const badPool = `{"tenant":"a.b","message":{"role":"ROLE_USER","messageId":"m-cm2","parts":[{"text":"hi"}]}}`
	const partsString = `{"message":{"role":"ROLE_USER","messageId":"m-cm3","parts":"x"}}`
	const roleNumber = `{"message":{"role":5,"messageId":"m-cm4","parts":[{"text":"hi"}]}}`
	const noContent = `{"message":{"role":"ROLE_USER","messageId":"m-cm5","parts":[{}]}}`
	partsSays := []string{"message.parts", "must be an array", "not a string"}
	roleSays := []string{"message.role", "must be a Role name (such as ROLE_USER) or its number (0 to 2)", "not 5"}
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
		{"rpc parts a string", "", rpc("SendMessage", partsString), "INVALID_PARAMS", partsSays},
		{"rpc stream parts a string", "", rpc("SendStreamingMessage", partsString), "INVALID_PARAMS", partsSays},
		{"rpc role a number naming no Role", "", rpc("SendMessage", roleNumber), "INVALID_PARAMS", roleSays},
		{"rpc stream role a number naming no Role", "", rpc("SendStreamingMessage", roleNumber), "INVALID_PARAMS", roleSays},
		{"rpc get historyLength a string", "", rpc("GetTask", `{"id":"t-1","historyLength":"x"}`), "INVALID_PARAMS",
			[]string{"historyLength", "must be an integer", `not the string "x"`}},
		{"rpc list pageSize a string", "", rpc("ListTasks", `{"pageSize":"x"}`), "INVALID_PARAMS", []string{"pageSize", "an integer"}},
		{"rpc cancel id a number", "", rpc("CancelTask", `{"id":5}`), "INVALID_PARAMS", []string{"id", "must be a string"}},
		{"rpc subscribe id a number", "", rpc("SubscribeToTask", `{"id":5}`), "INVALID_PARAMS", []string{"id", "must be a string"}},
		{"rpc params a string", "", rpc("GetTask", `"t-1"`), "INVALID_PARAMS", []string{"params", "must be an object", "not a string"}},
		{"rest parts a string", "/message:send", partsString, "INVALID_PARAMS", partsSays},
		{"rest stream parts a string", "/message:stream", partsString, "INVALID_PARAMS", partsSays},
		{"rest role a number naming no Role", "/message:send", roleNumber, "INVALID_PARAMS", roleSays},
		{"rest stream role a number naming no Role", "/message:stream", roleNumber, "INVALID_PARAMS", roleSays},
		{"rest part without content", "/message:send", noContent, "INVALID_PARAMS", []string{"part"}},
		{"rest stream part without content", "/message:stream", noContent, "INVALID_PARAMS", []string{"part"}},
		{"rest body an array", "/message:send", `[1]`, "INVALID_PARAMS", []string{"body", "must be an object", "not an array"}},
		{"rest push config url a number", "/tasks/t-1/pushNotificationConfigs", `{"url":5}`, "INVALID_PARAMS", []string{"url", "must be a string"}},
		{"rest not JSON", "/message:send", `{"message":`, "PARSE_ERROR", []string{"not one JSON value"}},
		{"rest stream not JSON", "/message:stream", `{"message":`, "PARSE_ERROR", []string{"not one JSON value"}},
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
		for _, bad := range []string{"normalizer ", "egress:", "ingress:", "host:", "subjects:", "json:", "Go value", "Go struct", "map[string]", "a2a.", "[]*",
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
