package normalizer_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/normalizer"
)

// TestErrorsBoundClientValues: a client value an error message quotes (a
// role, a method name, a media type, a part kind, an id …) comes back cut
// and escaped, never whole: a 1 MiB value gives a short message without
// its control characters, on every protocol path that echoes one.
func TestErrorsBoundClientValues(t *testing.T) {
	n := testNormalizer(t)
	// JSON-escaped: an ANSI escape, a newline and a NUL, then 1 MiB.
	huge := `\u001b[2J\n\u0000` + strings.Repeat("x", 1<<20)
	rpc := func(method, params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	}
	for _, c := range []struct{ name, protocol, body string }{
		{"A2A method", normalizer.ProtocolA2A, rpc(huge, `{}`)},
		{"A2A role", normalizer.ProtocolA2A, rpc("message/send", `{"message":{"messageId":"m1","role":"`+huge+`","parts":[{"kind":"text","text":"hi"}]}}`)},
		{"A2A part kind", normalizer.ProtocolA2A, string(a2aSendBody(`{"kind":"` + huge + `"}`))},
		{"A2A task id", normalizer.ProtocolA2A, rpc("tasks/get", `{"id":"`+huge+`"}`)},
		{"AgentVault method", normalizer.ProtocolAgentVault, rpc(huge, `{}`)},
		{"AgentVault role", normalizer.ProtocolAgentVault, rpc("tasks/send", `{"message":{"role":"`+huge+`","parts":[{"type":"text","content":"hi"}]}}`)},
		{"AgentVault part type", normalizer.ProtocolAgentVault, string(avSendBody(`{"type":"` + huge + `"}`))},
		{"ACP method", normalizer.ProtocolACP, rpc(huge, `{}`)},
		{"ACP extension method", normalizer.ProtocolACP, rpc("_"+huge, `{"sessionId":"`+huge+`"}`)},
		{"ACP block type", normalizer.ProtocolACP, rpc("session/prompt", `{"sessionId":"s1","prompt":[{"type":"`+huge+`"}]}`)},
		{"ACP session id", normalizer.ProtocolACP, rpc("session/prompt", `{"sessionId":"`+huge+`","prompt":[]}`)},
		{"A2E type", normalizer.ProtocolA2E, `{"type":"` + huge + `","id":7}`},
		{"A2E required field", normalizer.ProtocolA2E, `{"type":"invoke/event","req_id":"r","kind":"` + huge + `"}`},
		{"workflow type", normalizer.ProtocolWorkflow, `{"type":"` + huge + `"}`},
		{"workflow operation key", normalizer.ProtocolWorkflow, `{"type":"operationUpdate","operationId":"a","operation":{"` + huge + `":1}}` + "\n" + `{"type":"beginExecution","executionId":"e","operationOrder":["a"]}`},
		{"workflow operation order", normalizer.ProtocolWorkflow, `{"type":"beginExecution","executionId":"e","operationOrder":["` + huge + `"]}`},
		{"E2A request id", normalizer.ProtocolE2A, `{"request_id":"` + huge + `","method":"chat.send"}`},
		{"E2A timestamp", normalizer.ProtocolE2A, `{"method":"chat.send","timestamp":"` + huge + `"}`},
		{"E2A identity origin", normalizer.ProtocolE2A, `{"method":"chat.send","identity_origin":"` + huge + `"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			adapter, _ := n.Adapter(c.protocol)
			_, err := adapter(normalizer.Input{Body: []byte(c.body)})
			if err == nil {
				t.Fatal("accepted")
			}
			checkBoundedMessage(t, err.Error())
		})
	}
	// The door's check of a file's media type against a pool's modes.
	env := &e2a.Envelope{Params: map[string]any{"files": []any{map[string]any{"uri": "https://h/f", "mime_type": "image/\u001b" + strings.Repeat("x", 1<<20)}}}}
	err := normalizer.CheckInputModes(env, "p", nil)
	if !errors.Is(err, normalizer.ErrContentTypeNotSupported) {
		t.Fatalf("media type: %v", err)
	}
	checkBoundedMessage(t, err.Error())
}

// checkBoundedMessage fails when msg is long or holds a raw control
// character (a value that was not cut or escaped). The bound leaves room
// for a few quoted values of 64 escaped runes each.
func checkBoundedMessage(t *testing.T, msg string) {
	t.Helper()
	if len(msg) > 4096 {
		t.Errorf("message of %d bytes: %.200s…", len(msg), msg)
	}
	if i := strings.IndexFunc(msg, func(r rune) bool { return r < 0x20 || r == 0x7f }); i >= 0 {
		t.Errorf("message holds a raw control character at %d: %.200q", i, msg)
	}
}
