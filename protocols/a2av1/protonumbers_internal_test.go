package a2av1

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// TestProtoJSONNumbers: the members of the v1.0 requests that are 32-bit
// integers take what ProtoJSON takes (an integral number in any form, a
// string holding one) and the enums a number naming a value, rewritten as
// the SDK's decoding reads them; the rest is refused InvalidParams naming
// the member, or left to the SDK (another JSON type). Params already in
// the SDK's forms, and methods without such members, come back as they
// are (the same bytes, not decoded).
func TestProtoJSONNumbers(t *testing.T) {
	for _, c := range []struct {
		method, in, want string
	}{
		{"ListTasks", `{"pageSize":"2"}`, `{"pageSize":2}`},
		{"ListTasks", `{"pageSize":"-0","historyLength":"3"}`, `{"historyLength":3,"pageSize":0}`},
		{"ListTasks", `{"pageSize":2.0,"historyLength":1e1}`, `{"historyLength":10,"pageSize":2}`},
		{"ListTasks", `{"pageSize":"100e-2"}`, `{"pageSize":1}`},
		{"ListTasks", `{"pageSize":"2147483647"}`, `{"pageSize":2147483647}`},
		{"ListTasks", `{"historyLength":"-2147483648"}`, `{"historyLength":-2147483648}`},
		{"ListTasks", `{"status":3}`, `{"status":"TASK_STATE_COMPLETED"}`},
		{"ListTasks", `{"status":"6"}`, `{"status":"6"}`}, // a string is a name: the SDK's to read
		{"ListTasks", `{"status":0}`, `{"status":"TASK_STATE_UNSPECIFIED"}`},
		{"GetTask", `{"id":"t","historyLength":"0"}`, `{"historyLength":0,"id":"t"}`},
		{"GetTask", `{"id":"t","historyLength":null}`, `{"id":"t","historyLength":null}`},
		{"ListTaskPushNotificationConfigs", `{"taskId":"t","pageSize":"5"}`, `{"pageSize":5,"taskId":"t"}`},
		{"SendMessage", `{"message":{"role":1,"parts":[{"text":"hi"}],"messageId":"m"},"configuration":{"historyLength":"2"}}`,
			`{"configuration":{"historyLength":2},"message":{"messageId":"m","parts":[{"text":"hi"}],"role":"ROLE_USER"}}`},
		{"SendStreamingMessage", `{"message":{"role":2,"parts":[],"messageId":"m"}}`,
			`{"message":{"messageId":"m","parts":[],"role":"ROLE_AGENT"}}`},
		// Metadata holding members of those names is not read.
		{"SendMessage", `{"message":{"role":"ROLE_USER","parts":[],"messageId":"m","metadata":{"role":1,"historyLength":"x"}}}`,
			`{"message":{"role":"ROLE_USER","parts":[],"messageId":"m","metadata":{"role":1,"historyLength":"x"}}}`},
		// Other JSON types are the SDK's to refuse, in its words.
		{"ListTasks", `{"pageSize":true}`, `{"pageSize":true}`},
		{"ListTasks", `{"pageSize":{"a":1}}`, `{"pageSize":{"a":1}}`},
		{"SendMessage", `{"message":"x","configuration":5}`, `{"message":"x","configuration":5}`},
		{"ListTasks", `[1]`, `[1]`},
		{"CancelTask", `{"id":"t","pageSize":"2"}`, `{"id":"t","pageSize":"2"}`},
	} {
		got, err := protoJSONNumbers(c.method, json.RawMessage(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("%s %s: %s, %v; want %s", c.method, c.in, got, err, c.want)
		}
	}
	same := json.RawMessage(`{"pageSize":2,"historyLength":0,"status":"TASK_STATE_WORKING"}`)
	if got, _ := protoJSONNumbers("ListTasks", same); &got[0] != &same[0] {
		t.Errorf("params in the SDK's forms were rewritten: %s", got)
	}
}

// TestProtoJSONNumbersRefused: what ProtoJSON refuses for those members
// is InvalidParams saying which member and why.
func TestProtoJSONNumbersRefused(t *testing.T) {
	for _, c := range []struct {
		method, in string
		says       []string
	}{
		{"ListTasks", `{"pageSize":"two"}`, []string{"pageSize must be an integer", `not the string "two"`}},
		{"ListTasks", `{"pageSize":" 2"}`, []string{"pageSize must be an integer", `not the string " 2"`}},
		{"ListTasks", `{"pageSize":""}`, []string{"pageSize must be an integer"}},
		{"ListTasks", `{"pageSize":"0x10"}`, []string{"pageSize must be an integer"}},
		{"ListTasks", `{"pageSize":"2.5"}`, []string{"pageSize must be an integer, not the number 2.5"}},
		{"ListTasks", `{"pageSize":2.5}`, []string{"pageSize must be an integer, not the number 2.5"}},
		{"ListTasks", `{"pageSize":"3000000000"}`, []string{"pageSize must be a 32-bit integer (-2147483648 to 2147483647), not 3000000000"}},
		{"ListTasks", `{"pageSize":3e9}`, []string{"pageSize must be a 32-bit integer", "not 3e9"}},
		{"ListTasks", `{"historyLength":"-2147483649"}`, []string{"historyLength must be a 32-bit integer"}},
		{"ListTasks", `{"historyLength":"1e999999999999999999999"}`, []string{"historyLength must be a 32-bit integer"}},
		{"ListTasks", `{"status":12}`, []string{"status must be a TaskState name (such as TASK_STATE_SUBMITTED) or its number (0 to 8), not 12"}},
		{"ListTasks", `{"status":1.5}`, []string{"status must be a TaskState name", "not 1.5"}},
		{"GetTask", `{"id":"t","historyLength":"x"}`, []string{"historyLength must be an integer"}},
		{"SendMessage", `{"message":{"role":3,"parts":[],"messageId":"m"}}`, []string{"message.role must be a Role name (such as ROLE_USER) or its number (0 to 2), not 3"}},
		{"SendMessage", `{"message":{"role":"ROLE_USER","parts":[],"messageId":"m"},"configuration":{"historyLength":"1.5"}}`,
			[]string{"configuration.historyLength must be an integer, not the number 1.5"}},
		{"ListTaskPushNotificationConfigs", `{"taskId":"t","pageSize":"` + strings.Repeat("9", 100) + `"}`,
			[]string{"pageSize must be a 32-bit integer", "not " + strings.Repeat("9", 32) + "…"}},
	} {
		_, err := protoJSONNumbers(c.method, json.RawMessage(c.in))
		if !errors.Is(err, a2a.ErrInvalidParams) {
			t.Errorf("%s %s: %v, want InvalidParams", c.method, c.in, err)
			continue
		}
		for _, s := range c.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s %s: %q does not say %q", c.method, c.in, err, s)
			}
		}
	}
}

// TestInteger: a JSON number is an integer exactly when its value is,
// whatever its form; beyond 64 bits it is out of range, not wrapped.
func TestInteger(t *testing.T) {
	for tok, want := range map[string]int64{"0": 0, "-0": 0, "7": 7, "-7": -7, "7.000": 7, "0.7e1": 7, "70e-1": 7, "1E+2": 100,
		"0e99999999999999999999": 0, "9223372036854775807": 9223372036854775807, "9223372036854775808": 9223372036854775807,
		"-9223372036854775809": -9223372036854775808, "1e19": 9223372036854775807, "1e20": 9223372036854775807} {
		if n, ok := integer(tok); !ok || n != want {
			t.Errorf("integer(%s) = %d, %v; want %d", tok, n, ok, want)
		}
	}
	for _, tok := range []string{"0.5", "7.01", "75e-1", "1e-1", "-0.1", "1e-99999999999999999999"} {
		if n, ok := integer(tok); ok {
			t.Errorf("integer(%s) = %d, want no integer", tok, n)
		}
	}
}

// FuzzProtoJSONNumbers checks the door's reading of ListTasks params
// (callParams: proto names, then protoJSONNumbers) against ProtoJSON's
// own parser (protojson into a2apb.ListTasksRequest): what ProtoJSON
// takes is never refused, but for an enum number naming no TaskState
// (an open enum to ProtoJSON, refused here), and the SDK's decoding of
// the params rewritten reads the integers and the state ProtoJSON reads.
// Params ProtoJSON refuses may still be taken (the SDK's JSON reads more:
// unknown members, any case), never rewritten into invalid JSON.
func FuzzProtoJSONNumbers(f *testing.F) {
	for _, s := range []string{
		`{"pageSize":"2"}`, `{"pageSize":2}`, `{"pageSize":2.0,"historyLength":"1e1"}`, `{"page_size":"3","history_length":0}`,
		`{"status":3}`, `{"status":"TASK_STATE_WORKING"}`, `{"status":12}`, `{"status":"3"}`, `{"pageSize":"3000000000"}`,
		`{"historyLength":" 2"}`, `{"pageSize":-0.0}`, `{"status":1.0}`, `{"historyLength":"-2147483648"}`, `{"pageSize":"0x1"}`,
		`{"page\u0053ize":"2"}`, `{"pageSize":null}`, `{"historyLength":"1e99999999999"}`, `{"pageSize":"2","contextId":"c"}`, `{}`, `[]`, `null`,
		// A member by both its names: ProtoJSON's duplicate field, refused.
		`{"page_size":1,"pageSize":"1"}`, `{"context_id":"c","status":3,"contextId":"c"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := callParams("ListTasks", data)
		var pb a2apb.ListTasksRequest
		pbErr := protojson.Unmarshal(data, &pb)
		if err != nil {
			if !errors.Is(err, a2a.ErrInvalidParams) {
				t.Fatalf("%q: error of another kind: %v", data, err)
			}
			if _, known := a2apb.TaskState_name[int32(pb.GetStatus())]; pbErr == nil && known {
				t.Fatalf("%q: refused (%v); ProtoJSON reads %v", data, err, &pb)
			}
			return
		}
		if json.Valid(data) && !json.Valid(out) {
			t.Fatalf("%q: rewritten into invalid JSON %q", data, out)
		}
		if pbErr != nil {
			return
		}
		var req a2a.ListTasksRequest
		if err := json.Unmarshal(out, &req); err != nil {
			var mine struct {
				PageSize      *int           `json:"pageSize"`
				HistoryLength *int           `json:"historyLength"`
				Status        *a2a.TaskState `json:"status"`
			}
			if err := json.Unmarshal(out, &mine); err != nil {
				t.Fatalf("%q: ProtoJSON reads %v; the SDK's decoding of %s: %v", data, &pb, out, err)
			}
			return // another member the SDK reads otherwise (a timestamp's form)
		}
		hl := -1
		if req.HistoryLength != nil {
			hl = *req.HistoryLength
		}
		want := -1
		if pb.HistoryLength != nil {
			want = int(pb.GetHistoryLength())
		}
		if req.PageSize != int(pb.GetPageSize()) || hl != want || req.Status.String() != pb.GetStatus().String() {
			t.Fatalf("%q: read pageSize %d, historyLength %d, status %s; ProtoJSON reads %v", data, req.PageSize, hl, req.Status, &pb)
		}
	})
}
