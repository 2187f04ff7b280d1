package a2av1

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/protobuf/encoding/protojson"
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
		got, err := protoJSON("", json.RawMessage(c.in))
		if string(got) != c.want || err != nil {
			t.Errorf("protoJSON(%s) = %s, %v; want %s", c.in, got, err, c.want)
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
		got, err := protoJSON("", json.RawMessage(in))
		if !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), says) {
			t.Errorf("protoJSON(%s) = %s, %v; want InvalidParams saying %s", in, got, err, says)
		}
	}
	for _, in := range []string{`{"metadata":{"a_b":1,"aB":2}}`, `{"message":{"parts":[{"data":{"k_v":1,"kV":2}}]}}`} {
		if got, err := protoJSON("", json.RawMessage(in)); err != nil || string(got) != in {
			t.Errorf("protoJSON(%s) = %s, %v; want it as it is", in, got, err)
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
	// underscore, escaped (neither counted inside metadata or data), and
	// unsure: a name twice in one object (at any depth, metadata and data
	// too), or like another there but for case or underscores (not in
	// metadata or data), or one escaped anywhere, or too many to hold.
	for in, want := range map[string][3]bool{
		`{"message":{"role":"ROLE_USER","messageId":"m_1","parts":[{"text":"a_b \"c_d\": \u0041"}]}}`: {false, false, false},
		`{"message":{"message_id":"m"}}`:                                                {true, false, false},
		`{"a":[{"b":{"task_id" : 1}}]}`:                                                 {true, false, false},
		`{"page\u0053ize":"2"}`:                                                         {false, true, true},
		`{"text":"x\\"}`:                                                                {false, false, false},
		`{"metadata":{"trace_id":"t"},"id":"x"}`:                                        {false, false, false},
		`{"metadata":{"a":[{"b_c":"}"}]},"task_id":"x"}`:                                {true, false, false},
		`{"message":{"parts":[{"data":{"k_v":1}},{"media_type":"x"}]}}`:                 {true, false, false},
		`{"message":{"parts":[{"data":{"k_v":[1,{"x_y":"]"}]}}],"metadata":{"e_f":2}}}`: {false, false, false},
		`{"metadata":7,"history_length":1}`:                                             {true, false, false},
		`{"metadata":7,"a":{"b_c":1}}`:                                                  {true, false, false},
		`{"a":[{"data":1},[{"b_c":1}]]}`:                                                {true, false, false},
		`{"meta\u0064ata":{"a_b":1}}`:                                                   {true, true, true},
		`{"metadata":{"\u0061":1}}`:                                                     {false, false, true},
		`{"unterminated`:                                                                {true, true, true},
		`not json_at all`:                                                               {false, false, false},
		`{"message":{"messageId":"a"},"message":{"messageId":"b"}}`:                     {false, false, true},
		`{"message":{"messageId":"a","parts":[{"text":"a"},{"text":"b"}]},"messageId":1}`: {false, false, false},
		`{"metadata":{"a":{"b":1,"b":2}}}`:                                                {false, false, true},
		`{"a":{"b":1},"c":{"b":1},"b":{"b":{"b":1}}}`:                                     {false, false, false},
		`{"a":[{"b":1,"c":2},{"b":1}],"b":[]}`:                                            {false, false, false},
		`{"a":[{"b":1,"c":2},{"b":1,"b":1}]}`:                                             {false, false, true},
		// Names encoding/json reads as one (its case-insensitive match),
		// also once jsonNames has rewritten a proto name: not in metadata
		// or data, whose keys are a map's.
		`{"message":{"messageId":"a"},"Message":{"messageId":"b"}}`: {false, false, true},
		`{"message":{"message_id":"a","MessageId":"b"}}`:            {true, false, true},
		`{"a":[{"taskId":1,"TASKID":2}]}`:                           {false, false, true},
		`{"kind":1,"\u212aind":2}`:                                  {false, true, true},
		"{\"kind\":1,\"\u212aind\":2}":                              {false, false, true},
		`{"metadata":{"k":1,"K":2},"data":{"a_b":{"x":1,"X":2}}}`:   {false, false, false},
		`{"a":{"b":1},"A_":2}`:                                      {true, false, true},
		strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 40): {false, false, true},
		`{` + manyMembers(nameScanNames) + `}`:                      {false, false, false},
		`{` + manyMembers(nameScanNames+1) + `}`:                    {false, false, true},
	} {
		if u, e, d := memberNames([]byte(in)); [3]bool{u, e, d} != want {
			t.Errorf("memberNames(%s) = %v, %v, %v; want %v", in, u, e, d, want)
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

// manyMembers is n members of distinct names, comma-separated.
func manyMembers(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"m%d":%d`, i, i)
	}
	return b.String()
}

// TestProtoJSONDuplicates: a member sent twice under one name in one
// object of a request is refused (InvalidParams naming it) where
// ProtoJSON refuses it (protojson into a2a.proto's request: "duplicate
// field", and in metadata's and data's google.protobuf.Struct "duplicate
// map key", at any depth), as a member by both its names is; the SDK's
// encoding/json kept the last. The same name in two objects is not one.
func TestProtoJSONDuplicates(t *testing.T) {
	for in, says := range map[string]string{
		`{"message":{"messageId":"a"},"message":{"messageId":"b"}}`:                             "duplicate field message: sent twice",
		`{"message":{"messageId":"a","messageId":"a"}}`:                                         "duplicate field message.messageId",
		`{"message":{"message_id":"a","message_id":"a"}}`:                                       "duplicate field message.message_id",
		`{"message":{"parts":[{"text":"a"},{"text":"a","text":"b"}]}}`:                          "duplicate field message.parts[1].text",
		`{"metadata":{"a":1,"a":2}}`:                                                            "duplicate field metadata.a",
		`{"message":{"parts":[{"data":{"x":{"y":1,"y":2}}}]}}`:                                  "duplicate field message.parts[0].data.x.y",
		`{"message":{"parts":[{"data":[{"y":1,"y":2}]}]}}`:                                      "duplicate field message.parts[0].data[0].y",
		`{"message":{"messageId":"a","message\u0049d":"b"}}`:                                    "duplicate field message.messageId",
		`{"metadata":{"a":1,"\u0061":2}}`:                                                       "duplicate field metadata.a",
		`{"message":{"extensions":["a"],"extensions":["b"]}}`:                                   "duplicate field message.extensions",
		`{"configuration":{"historyLength":"2","historyLength":2},"message":{"messageId":"m"}}`: "duplicate field configuration.historyLength",
	} {
		var pb a2apb.SendMessageRequest
		if err := protojson.Unmarshal([]byte(in), &pb); err == nil || !strings.Contains(err.Error(), "duplicate") {
			t.Fatalf("protojson reads %s (%v): not a duplicate", in, err)
		}
		got, err := protoJSON(methodSendMessage, json.RawMessage(in))
		if !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), says) {
			t.Errorf("protoJSON(%s) = %s, %v; want InvalidParams saying %s", in, got, err, says)
		}
	}
	for _, in := range []string{
		`{"message":{"messageId":"a","parts":[{"text":"a","metadata":{"text":1}},{"text":"b"}],"metadata":{"messageId":"x"}},"metadata":{"message":1}}`,
		`{"message":{"messageId":"a","parts":[{"data":{"a":{"b":1},"c":{"b":1}}}]}}`,
	} {
		var pb a2apb.SendMessageRequest
		if err := protojson.Unmarshal([]byte(in), &pb); err != nil {
			t.Fatalf("protojson refuses %s: %v", in, err)
		}
		if got, err := protoJSON(methodSendMessage, json.RawMessage(in)); err != nil || string(got) != in {
			t.Errorf("protoJSON(%s) = %s, %v; want it as it is", in, got, err)
		}
	}
}

// TestProtoJSONCaseFold: two members of one object whose names differ but
// match case-insensitively (message and Message; messageId and MessageId,
// also when one is sent by its proto name, message_id) are refused
// (InvalidParams naming them), as ProtoJSON refuses such a request (its
// names are case-sensitive: one of them names no field, "unknown
// field"). The SDK's decoder, encoding/json, matches names
// case-insensitively: it read both into one field and kept the last. The
// keys of metadata and data (a google.protobuf.Struct in a2a.proto, a map
// to encoding/json) are the sender's, case-sensitive to both: kept.
func TestProtoJSONCaseFold(t *testing.T) {
	for in, says := range map[string]string{
		`{"message":{"messageId":"a"},"Message":{"messageId":"b"}}`:                            "duplicate field message: sent as message and as Message",
		`{"message":{"messageId":"a","MessageId":"b"}}`:                                        "duplicate field message.messageId: sent as messageId and as MessageId",
		`{"message":{"message_id":"a","MessageId":"b"}}`:                                       "duplicate field message.messageId: sent as message_id and as MessageId",
		`{"message":{"messageId":"a","parts":[{"text":"a"},{"text":"a","TEXT":"b"}]}}`:         "duplicate field message.parts[1].text: sent as text and as TEXT",
		`{"configuration":{"historyLength":1,"HistoryLength":2}}`:                              "duplicate field configuration.historyLength",
		"{\"message\":{\"messageId\":\"a\",\"parts\":[{\"\u212aind\":\"x\",\"kind\":\"y\"}]}}": "duplicate field message.parts[0].\u212aind",
		`{"message":{"messageId":"a","Metadata":{"k":1},"metadata":{"k":2}}}`:                  "duplicate field message.Metadata: sent as Metadata and as metadata",
	} {
		var pb a2apb.SendMessageRequest
		if err := protojson.Unmarshal([]byte(in), &pb); err == nil {
			t.Fatalf("protojson reads %s", in)
		}
		got, err := protoJSON(methodSendMessage, json.RawMessage(in))
		if !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), says) {
			t.Errorf("protoJSON(%s) = %s, %v; want InvalidParams saying %s", in, got, err, says)
		}
	}
	for _, in := range []string{
		`{"message":{"messageId":"a","metadata":{"k":1,"K":2},"parts":[{"data":{"a":{"x":1,"X":2}},"metadata":{"Text":1,"text":2}}]}}`,
		`{"message":{"messageId":"a","extensions":["x","X"]}}`,
	} {
		var pb a2apb.SendMessageRequest
		if err := protojson.Unmarshal([]byte(in), &pb); err != nil {
			t.Fatalf("protojson refuses %s: %v", in, err)
		}
		if got, err := protoJSON(methodSendMessage, json.RawMessage(in)); err != nil || string(got) != in {
			t.Errorf("protoJSON(%s) = %s, %v; want it as it is", in, got, err)
		}
	}
}

// TestProtoJSONOneDecode: a request that needs both its names and its
// numbers rewritten (history_length sent as "2") is decoded once for both
// (jsonNames): the numbers cost a few allocations over the names alone,
// their values' rewrite (7 measured), not a second decode and encode of
// the request (65 measured: protoJSONNumbers after the names).
func TestProtoJSONOneDecode(t *testing.T) {
	names := json.RawMessage(`{"message":{"message_id":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"history_length":2}}`)
	both := json.RawMessage(`{"message":{"message_id":"m","role":1,"parts":[{"text":"x"}]},"configuration":{"history_length":"2"}}`)
	allocs := func(req json.RawMessage) float64 {
		return testing.AllocsPerRun(50, func() {
			if _, err := protoJSON(methodSendMessage, req); err != nil {
				t.Fatal(err)
			}
		})
	}
	if got, want := string(must(protoJSON(methodSendMessage, both))), `{"configuration":{"historyLength":2},"message":{"messageId":"m","parts":[{"text":"x"}],"role":"ROLE_USER"}}`; got != want {
		t.Fatalf("protoJSON(%s) = %s, want %s", both, got, want)
	}
	if a, b := allocs(names), allocs(both); b > a+16 {
		t.Errorf("protoJSON: %v allocations for names and numbers, %v for names alone; want the numbers read in the same decode", b, a)
	}
}

// must is v, failing on err.
func must(v json.RawMessage, err error) json.RawMessage {
	if err != nil {
		panic(err)
	}
	return v
}
