package a2amap_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	legacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
)

// storedEnvelope is the envelope of an A2A request (protocol's adapter)
// as the task's record reads it back: normalized, then written and read
// as JSON.
func storedEnvelope(t *testing.T, protocol, method, params string) *e2a.Envelope {
	t.Helper()
	adapter, _ := normalizer.New(normalizer.Config{}).Adapter(protocol)
	res, err := adapter(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`)})
	if err != nil {
		t.Fatalf("%s %s: %v", method, params, err)
	}
	b, err := json.Marshal(res.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	env, err := e2a.FromJSON(b)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return env
}

// historyMessage is the first history message of the task of env alone,
// as JSON (A2A v1.0's).
func historyMessage(t *testing.T, env *e2a.Envelope) string {
	t.Helper()
	task := a2amap.BuildTask("t1", "c1", []a2amap.Request{{Envelope: env}}, nil)
	if len(task.History) == 0 {
		t.Fatalf("no history for params %v", env.Params)
	}
	b, _ := json.Marshal(task.History[0])
	return string(b)
}

// TestUserMessageAsSent: the Message a client sends is part of the task's
// history as sent (A2A v0.3 §6.4 Task.history; v1.0 the same): its parts
// in their order, each with its metadata, its metadata, extensions,
// reference tasks and role. The history rebuilt it from params.text (the
// text parts joined by "\n"), then params.files, then params.data_parts:
// [data, text+metadata, file, text] came back as [text "second\nfourth",
// file, data], the text part's metadata gone; a thought part was dropped,
// bytes sent without a media type came back as application/octet-stream,
// an agent's message as the user's.
func TestUserMessageAsSent(t *testing.T) {
	for name, msg := range map[string]string{
		"mixed": `{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"data","data":{"first":1},"metadata":{"k":"d"}},` +
			`{"kind":"text","text":"second","metadata":{"k":"t"}},{"kind":"file","file":{"uri":"https://x/third.json","mimeType":"application/json"}},` +
			`{"kind":"text","text":"fourth"}]}`,
		"everything": `{"kind":"message","messageId":"m2","role":"user","metadata":{"trace":"t1"},"extensions":["https://example.com/ext"],` +
			`"referenceTaskIds":["task-0"],"parts":[{"kind":"text","text":"hmm","metadata":{"thought":true}},{"kind":"text","text":"look"},` +
			`{"kind":"file","file":{"bytes":"aGVsbG8=","name":"a.bin"}},{"kind":"file","file":{"uri":"https://x/b.png","name":"b.png","mimeType":"image/png"},"metadata":{"m":1}},` +
			`{"kind":"data","data":{"x":true},"metadata":{"type":"function_call"}},{"kind":"text","text":"end"}]}`,
		"two texts":       `{"kind":"message","messageId":"m3","role":"user","parts":[{"kind":"text","text":"a"},{"kind":"text","text":"b"}]}`,
		"empty text":      `{"kind":"message","messageId":"m4","role":"user","parts":[{"kind":"text","text":""}]}`,
		"agent's message": `{"kind":"message","messageId":"m5","role":"agent","parts":[{"kind":"text","text":"from an agent"}]}`,
		"text file data":  `{"kind":"message","messageId":"m6","role":"user","parts":[{"kind":"text","text":"t"},{"kind":"file","file":{"uri":"https://x/f","mimeType":"text/plain"}},{"kind":"data","data":{"d":1}}]}`,
		"plain":           `{"kind":"message","messageId":"m7","role":"user","parts":[{"kind":"text","text":"hello"}]}`,
	} {
		env := storedEnvelope(t, normalizer.ProtocolA2A, "message/send", `{"message":`+msg+`}`)
		var old legacy.Message
		if err := json.Unmarshal([]byte(msg), &old); err != nil {
			t.Fatal(err)
		}
		want, err := a2av0.ToV1Message(&old)
		if err != nil {
			t.Fatal(err)
		}
		want.TaskID, want.ContextID = "t1", "c1"
		wb, _ := json.Marshal(want)
		if got := historyMessage(t, env); got != string(wb) {
			t.Errorf("%s: history shows\n %s\nsent\n %s", name, got, wb)
		}
	}
}

// TestPartOrderOnlyWhenNeeded: params.part_order is in the envelope only
// when params.text, files and data_parts in that order are not the message
// (a message of one text part has params.text alone: the envelope of the
// common case does not grow); the params the agent reads are the same
// with it.
func TestPartOrderOnlyWhenNeeded(t *testing.T) {
	for msg, order := range map[string]string{
		`[{"kind":"text","text":"hello"}]`: "",
		`[{"kind":"text","text":"t"},{"kind":"file","file":{"uri":"https://x/f"}},{"kind":"data","data":{"d":1}}]`:            "",
		`[{"kind":"file","file":{"bytes":"aGk=","mimeType":"text/plain"}},{"kind":"data","data":{"d":1},"metadata":{"m":1}}]`: "",
		`[{"kind":"data","data":{"d":1}},{"kind":"text","text":"t"}]`:                                                         "dt",
		`[{"kind":"text","text":"t","metadata":{"m":1}}]`:                                                                     "t",
		`[{"kind":"file","file":{"bytes":"aGk="}}]`:                                                                           "f",
		`[{"kind":"file","file":{"uri":"https://x/f"},"metadata":{"m":1}},{"kind":"text","text":"t"}]`:                        "ft",
	} {
		env := storedEnvelope(t, normalizer.ProtocolA2A, "message/send", `{"message":{"messageId":"m","role":"user","parts":`+msg+`}}`)
		if got, _ := env.Params[normalizer.PartOrder].(string); got != order {
			t.Errorf("%s: part_order %q, want %q", msg, got, order)
		}
		if order == "" && msg == `[{"kind":"text","text":"hello"}]` && len(env.Params) != 1 {
			t.Errorf("%s: params %v; want text alone", msg, env.Params)
		}
	}
}

// TestUserMessageAsSentRedacted: the parts the history shows are the
// params the agent gets, redacted as they are (normalizer/secrets.go): a
// secret in a data part or a part's metadata is not stored, whatever the
// order of the parts.
func TestUserMessageAsSentRedacted(t *testing.T) {
	env := storedEnvelope(t, normalizer.ProtocolA2A, "message/send", `{"message":{"messageId":"m","role":"user","parts":[`+
		`{"kind":"data","data":{"password":"hunter2"}},{"kind":"text","text":"t","metadata":{"api_key":"sk-secret1"}}]}}`)
	b, _ := json.Marshal(env)
	got := historyMessage(t, env)
	for _, secret := range []string{"hunter2", "sk-secret1"} {
		if strings.Contains(string(b), secret) || strings.Contains(got, secret) {
			t.Errorf("secret %s kept: envelope %s, history %s", secret, b, got)
		}
	}
	if !strings.Contains(got, `"text":"t"`) || !strings.Contains(got, normalizer.Redacted) || strings.Index(got, "password") > strings.Index(got, `"text":"t"`) {
		t.Errorf("history %s; want the data part, redacted, then the text part", got)
	}
}

// TestAgentVaultMessageAsSent: an AgentVault tasks/send's parts are in its
// task's history in their order too.
func TestAgentVaultMessageAsSent(t *testing.T) {
	env := storedEnvelope(t, normalizer.ProtocolAgentVault, "tasks/send", `{"message":{"role":"user","parts":[`+
		`{"type":"data","content":{"a":1}},{"type":"text","content":"hi"},{"type":"file","url":"https://x/f.txt","media_type":"text/plain"}]}}`)
	task := a2amap.BuildTask("t1", "c1", []a2amap.Request{{Envelope: env}}, nil)
	var kinds []string
	for _, p := range task.History[0].Parts {
		switch p.Content.(type) {
		case a2a.Data:
			kinds = append(kinds, "data")
		case a2a.Text:
			kinds = append(kinds, "text")
		case a2a.URL:
			kinds = append(kinds, "url")
		}
	}
	if want := []string{"data", "text", "url"}; !slices.Equal(kinds, want) {
		t.Errorf("history parts %v, want %v", kinds, want)
	}
}
