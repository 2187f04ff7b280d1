package a2av1

import (
	"encoding/json"
	"strings"
	"testing"
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
		{`{"history_length":1,"historyLength":2}`, `{"history_length":1,"historyLength":2}`},
		{`not json_at all`, `not json_at all`},
		// Deeper than jsonNamesDepth: left as it is.
		{strings.Repeat(`[`, 20) + `{"a_b":1}` + strings.Repeat(`]`, 20), strings.Repeat(`[`, 20) + `{"a_b":1}` + strings.Repeat(`]`, 20)},
	} {
		got := protoJSONParams(json.RawMessage(c.in))
		if string(got) != c.want {
			t.Errorf("protoJSONParams(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	for k, want := range map[string]string{"history_length": "historyLength", "task_push_notification_config": "taskPushNotificationConfig",
		"id": "id", "_x": "_x", "x_": "x_", "a__b": "a__b", "A_b": "A_b", "v2_name": "v2Name"} {
		if got := lowerCamel(k); got != want {
			t.Errorf("lowerCamel(%q) = %q, want %q", k, got, want)
		}
	}
}
