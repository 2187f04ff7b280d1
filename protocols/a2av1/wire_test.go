package a2av1

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestProtoJSONParams: proto field names become JSON names at every level
// of the request message, the members of metadata and data do not, and
// params without one come back as they were.
func TestProtoJSONParams(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"id":"t1","history_length":1}`, `{"historyLength":1,"id":"t1"}`},
		{`{"message":{"message_id":"m","task_id":"t","parts":[{"text":"a_b","media_type":"text/plain","metadata":{"x_y":1}},{"data":{"k_v":2}}],"metadata":{"interaction_spec_version":"0.1"}},` +
			`"configuration":{"accepted_output_modes":["text/plain"],"return_immediately":true}}`,
			`{"configuration":{"acceptedOutputModes":["text/plain"],"returnImmediately":true},"message":{"messageId":"m","metadata":{"interaction_spec_version":"0.1"},` +
				`"parts":[{"mediaType":"text/plain","metadata":{"x_y":1},"text":"a_b"},{"data":{"k_v":2}}],"taskId":"t"}}`},
		{`{"id":"t1","historyLength":1}`, `{"id":"t1","historyLength":1}`},
		{`{"metadata":{"a_b":1},"id":"x_y"}`, `{"metadata":{"a_b":1},"id":"x_y"}`},
		{`{"page\u005fsize":1}`, `{"pageSize":1}`},
		{`{"push_notification_config":{"url":"u","authentication":{"scheme":"Bearer"}},"task_id":"t"}`,
			`{"pushNotificationConfig":{"url":"u","authentication":{"scheme":"Bearer"}},"taskId":"t"}`},
		{`not json_at all`, `not json_at all`},
		// Deeper than jsonNamesDepth: left as it is.
		{strings.Repeat(`[`, 20) + `{"a_b":1}` + strings.Repeat(`]`, 20), strings.Repeat(`[`, 20) + `{"a_b":1}` + strings.Repeat(`]`, 20)},
	} {
		got, err := protoJSONParams(json.RawMessage(c.in))
		if string(got) != c.want || err != nil {
			t.Errorf("protoJSONParams(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	// A member by both its names is refused, as ProtoJSON refuses it
	// ("duplicate field"), named by its place in the request; the members
	// of metadata and data are free-form, any names.
	for in, says := range map[string]string{
		`{"history_length":1,"historyLength":2}`:                                                             "duplicate field historyLength: sent as history_length and as historyLength",
		`{"message":{"messageId":"a","message_id":"b"}}`:                                                     "duplicate field message.messageId: sent as message_id",
		`{"message":{"parts":[{"text":"x"},{"media_type":"a","mediaType":"b"}]}}`:                            "duplicate field message.parts[1].mediaType",
		`{"configuration":{"accepted_output_modes":[],"acceptedOutputModes":[]},"task_id":"t","taskId":"t"}`: "duplicate field taskId",
	} {
		got, err := protoJSONParams(json.RawMessage(in))
		if !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), says) {
			t.Errorf("protoJSONParams(%s) = %s, %v; want InvalidParams saying %s", in, got, err, says)
		}
	}
	for _, in := range []string{`{"metadata":{"a_b":1,"aB":2}}`, `{"message":{"parts":[{"data":{"k_v":1,"kV":2}}]}}`} {
		if got, err := protoJSONParams(json.RawMessage(in)); err != nil || string(got) != in {
			t.Errorf("protoJSONParams(%s) = %s, %v; want it as it is", in, got, err)
		}
	}
	for k, want := range map[string]string{"history_length": "historyLength", "task_push_notification_config": "taskPushNotificationConfig",
		"id": "id", "_x": "_x", "x_": "x_", "a__b": "a__b", "A_b": "A_b", "v2_name": "v2Name"} {
		if got := lowerCamel(k); got != want {
			t.Errorf("lowerCamel(%q) = %q, want %q", k, got, want)
		}
	}
}

// TestMemberNames: only member names are looked at (a value's underscore,
// as every message's "ROLE_USER", or escape is not a name's), at any
// depth, and a request of JSON names alone is read without a decode: no
// allocation (a CI bench found 74 more per HTTP+JSON stream request when
// the underscore of "ROLE_USER" sent every body through the decoder).
func TestMemberNames(t *testing.T) {
	for in, want := range map[string][2]bool{
		`{"message":{"role":"ROLE_USER","messageId":"m_1","parts":[{"text":"a_b \"c_d\": \u0041"}]}}`: {false, false},
		`{"message":{"message_id":"m"}}`:                                                {true, false},
		`{"a":[{"b":{"task_id" : 1}}]}`:                                                 {true, false},
		`{"page\u0053ize":"2"}`:                                                         {false, true},
		`{"text":"x\\"}`:                                                                {false, false},
		`{"metadata":{"trace_id":"t"},"id":"x"}`:                                        {false, false},
		`{"metadata":{"a":[{"b_c":"}"}]},"task_id":"x"}`:                                {true, false},
		`{"message":{"parts":[{"data":{"k_v":1}},{"media_type":"x"}]}}`:                 {true, false},
		`{"message":{"parts":[{"data":{"k_v":[1,{"x_y":"]"}]}}],"metadata":{"e_f":2}}}`: {false, false},
		`{"metadata":7,"history_length":1}`:                                             {true, false},
		`{"meta\u0064ata":{"a_b":1}}`:                                                   {true, true},
		`{"unterminated`:                                                                {true, true},
		`not json_at all`:                                                               {false, false},
	} {
		if u, e := memberNames([]byte(in)); [2]bool{u, e} != want {
			t.Errorf("memberNames(%s) = %v, %v; want %v", in, u, e, want)
		}
	}
	for method, req := range map[string]string{
		methodSendStreamingMessage: `{"message":{"role":"ROLE_USER","messageId":"m_1","parts":[{"text":"snake_case text"}]},"configuration":{"historyLength":2}}`,
		"ListTasks":                `{"contextId":"c_1","pageSize":10,"status":"TASK_STATE_WORKING"}`,
		methodSendMessage:          `{"message":{"role":"ROLE_USER","messageId":"m","parts":[{"data":{"tool_name":"x"}}]},"metadata":{"frame_bytes":100}}`,
	} {
		params := json.RawMessage(req)
		if n := testing.AllocsPerRun(100, func() {
			if _, err := protoJSON(method, params); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("protoJSON(%s, %s): %v allocations, want none (read as sent)", method, req, n)
		}
	}
}
