package a2av1_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
)

// TestProtoJSONNumbersAtTheDoor: A2A v1.0's JSON is ProtoJSON, so the
// door takes a request's 32-bit integers as strings ("pageSize":"2",
// "historyLength":"0") or integral numbers in any form (2.0), and its
// enums by number ("role":1, "status":3), on JSON-RPC and HTTP+JSON's
// message:send, as it takes them in their usual forms; what ProtoJSON
// refuses (a string holding no integer, a number out of the 32-bit range,
// an enum number naming no value) is -32602 (HTTP 400) naming the member.
// Before, every such string or enum number was refused: {"pageSize":"2"}
// with "pageSize must be an integer, not a string".
func TestProtoJSONNumbersAtTheDoor(t *testing.T) {
	p := askPipeline(t)
	sent, code, body := rpcCall(t, p, "SendMessage",
		`{"message":{"role":1,"parts":[{"text":"proto numbers"}],"messageId":"m-pn1"},"configuration":{"historyLength":"0"}}`)
	var res struct {
		Task a2a.Task `json:"task"`
	}
	task := &res.Task
	if code != 0 || json.Unmarshal(sent, &res) != nil || task.ID == "" || len(task.History) != 0 {
		t.Fatalf("SendMessage with role 1 and historyLength \"0\": %s", body)
	}
	status, _, restBody := rawCall(t, "POST", p.URL+a2av1.Path+"/message:send",
		`{"message":{"role":1,"parts":[{"text":"rest proto numbers"}],"messageId":"m-pn2"},"configuration":{"historyLength":"1.0e0"}}`,
		map[string]string{"A2A-Version": "1.0"})
	if status != http.StatusOK || !strings.Contains(restBody, `"task"`) {
		t.Fatalf("HTTP+JSON message:send with role 1: %d %s", status, restBody)
	}
	got, code, body := rpcCall(t, p, "GetTask", `{"id":"`+string(task.ID)+`","historyLength":"1"}`)
	var gt a2a.Task
	if code != 0 || json.Unmarshal(got, &gt) != nil || len(gt.History) != 1 {
		t.Errorf("GetTask with historyLength \"1\": %s", body)
	}
	listed, code, body := rpcCall(t, p, "ListTasks", `{"pageSize":"1","status":6,"historyLength":"0"}`)
	var list a2a.ListTasksResponse
	if code != 0 || json.Unmarshal(listed, &list) != nil || list.PageSize != 1 || len(list.Tasks) != 1 ||
		list.Tasks[0].Status.State != a2a.TaskStateInputRequired || list.NextPageToken == "" {
		t.Errorf("ListTasks with pageSize \"1\", status 6: %s; want one input-required task and a next page", body)
	}
	if _, code, body := rpcCall(t, p, "ListTasks", `{"status":3}`); code != 0 || !strings.Contains(body, `"tasks":[]`) {
		t.Errorf("ListTasks with status 3 (completed): %s; want none", body)
	}
	for _, c := range []struct{ method, params, says string }{
		{"ListTasks", `{"pageSize":"2x"}`, `pageSize must be an integer (a number, or a string holding one), not the string \"2x\"`},
		{"ListTasks", `{"pageSize":"4294967296"}`, "pageSize must be a 32-bit integer (-2147483648 to 2147483647), not 4294967296"},
		{"ListTasks", `{"status":9}`, "status must be a TaskState name (such as TASK_STATE_SUBMITTED) or its number (0 to 8), not 9"},
		{"GetTask", `{"id":"` + string(task.ID) + `","historyLength":"1.5"}`, "historyLength must be an integer, not the number 1.5"},
		{"SendStreamingMessage", `{"message":{"role":7,"parts":[{"text":"x"}],"messageId":"m-pn3"}}`, "message.role must be a Role name"},
	} {
		_, code, body := rpcCall(t, p, c.method, c.params)
		if code != -32602 || !strings.Contains(body, c.says) {
			t.Errorf("%s %s: %s; want -32602 saying %s", c.method, c.params, body, c.says)
		}
	}
	status, _, restBody = rawCall(t, "POST", p.URL+a2av1.Path+"/message:send",
		`{"message":{"role":"ROLE_USER","parts":[{"text":"x"}],"messageId":"m-pn4"},"configuration":{"historyLength":"-"}}`,
		map[string]string{"A2A-Version": "1.0"})
	if status != http.StatusBadRequest || !strings.Contains(restBody, "INVALID_ARGUMENT") ||
		!strings.Contains(restBody, "configuration.historyLength must be an integer") {
		t.Errorf("HTTP+JSON message:send with historyLength \"-\": %d %s", status, restBody)
	}
}

// TestProtoJSONNamesOnHTTPJSON: the HTTP+JSON binding reads a body's
// members by their proto field names (message_id, context_id,
// history_length, accepted_output_modes) as by their JSON names, as
// JSON-RPC reads params (A2A v1.0's HTTP+JSON is ProtoJSON of a2a.proto),
// on message:send and message:stream; a member sent by both names is 400
// INVALID_ARGUMENT naming it, as ProtoJSON refuses a duplicate field (so
// is it on JSON-RPC, -32602). A ListTasks query takes the status by
// number. Before, message:send read no snake_case member: 400
// "message.messageId is required".
func TestProtoJSONNamesOnHTTPJSON(t *testing.T) {
	p := askPipeline(t)
	v1 := map[string]string{"A2A-Version": "1.0"}
	status, _, body := rawCall(t, "POST", p.URL+a2av1.Path+"/message:send",
		`{"message":{"message_id":"m-sn1","context_id":"ctx-snake","role":"ROLE_USER","parts":[{"text":"snake","media_type":"text/plain"}]},`+
			`"configuration":{"history_length":0,"accepted_output_modes":["text/plain"]}}`, v1)
	var res struct {
		Task a2a.Task `json:"task"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &res) != nil || res.Task.ID == "" ||
		res.Task.ContextID != "ctx-snake" || len(res.Task.History) != 0 || res.Task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("message:send with proto field names: %d %s; want the task, input-required, in context ctx-snake, no history", status, body)
	}
	task := string(res.Task.ID)
	status, hdr, body := rawCall(t, "POST", p.URL+a2av1.Path+"/message:stream",
		`{"message":{"message_id":"m-sn2","task_id":"`+task+`","role":"ROLE_USER","parts":[{"text":"ask again"}]},"configuration":{"history_length":1}}`, v1)
	if status != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") ||
		!strings.Contains(body, `"taskId":"`+task+`"`) || !strings.Contains(body, "TASK_STATE_INPUT_REQUIRED") {
		t.Fatalf("message:stream with proto field names: %d %s; want the task's stream", status, body)
	}
	if status, _, body = rawCall(t, "GET", p.URL+a2av1.Path+"/tasks?status=6", "", v1); status != http.StatusOK ||
		!strings.Contains(body, `"id":"`+task+`"`) {
		t.Errorf("GET /tasks?status=6: %d %s; want the input-required task", status, body)
	}
	if status, _, body = rawCall(t, "GET", p.URL+a2av1.Path+"/tasks?status=3", "", v1); status != http.StatusOK ||
		strings.Contains(body, `"id":"`+task+`"`) {
		t.Errorf("GET /tasks?status=3: %d %s; want no completed task", status, body)
	}
	for _, c := range []struct{ path, body, says string }{
		{"/message:send", `{"message":{"message_id":"m-sn3","messageId":"m-sn3","role":"ROLE_USER","parts":[{"text":"x"}]}}`,
			"duplicate field message.messageId: sent as message_id and as messageId"},
		{"/message:stream", `{"message":{"messageId":"m-sn4","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"history_length":1,"historyLength":1}}`,
			"duplicate field configuration.historyLength"},
		{"/tasks/" + task + "/pushNotificationConfigs", `{"url":"https://client.example.com/hook","task_id":"` + task + `","taskId":"` + task + `"}`,
			"duplicate field taskId"},
		// A member twice by one name, as ProtoJSON refuses it too (the SDK
		// kept the last): in metadata (a Struct) at any depth as well.
		{"/message:send", `{"message":{"messageId":"m-d1","role":"ROLE_USER","parts":[{"text":"x"}]},"message":{"messageId":"m-d2","role":"ROLE_USER","parts":[{"text":"y"}]}}`,
			"duplicate field message: sent twice"},
		{"/message:stream", `{"message":{"messageId":"m-d3","role":"ROLE_USER","parts":[{"text":"x"}],"metadata":{"k":{"a":1,"a":2}}}}`,
			"duplicate field message.metadata.k.a: sent twice"},
		// Names that differ in case alone: ProtoJSON reads one as no field
		// (names are case-sensitive), the SDK's encoding/json both as one.
		{"/message:send", `{"message":{"messageId":"m-c1","role":"ROLE_USER","parts":[{"text":"x"}]},"Message":{"messageId":"m-c2","role":"ROLE_USER","parts":[{"text":"y"}]}}`,
			"duplicate field message: sent as message and as Message"},
	} {
		status, _, body := rawCall(t, "POST", p.URL+a2av1.Path+c.path, c.body, v1)
		if status != http.StatusBadRequest || !strings.Contains(body, `"status":"INVALID_ARGUMENT"`) || !strings.Contains(body, c.says) {
			t.Errorf("POST %s %s: %d %s; want 400 INVALID_ARGUMENT saying %s", c.path, c.body, status, body, c.says)
		}
	}
	if _, code, body := rpcCall(t, p, "GetTask", `{"id":"`+task+`","history_length":1,"historyLength":1}`); code != -32602 ||
		!strings.Contains(body, "duplicate field historyLength") {
		t.Errorf("JSON-RPC GetTask with history_length and historyLength: %s; want -32602 naming historyLength", body)
	}
	if _, code, body := rpcCall(t, p, "SendMessage", `{"message":{"messageId":"m-c3","MessageId":"m-c4","role":"ROLE_USER","parts":[{"text":"x"}]}}`); code != -32602 ||
		!strings.Contains(body, "duplicate field message.messageId: sent as messageId and as MessageId") {
		t.Errorf("JSON-RPC SendMessage with messageId and MessageId: %s; want -32602 naming message.messageId", body)
	}
	if _, code, body := rpcCall(t, p, "SendMessage", `{"message":{"messageId":"m-d4","messageId":"m-d5","role":"ROLE_USER","parts":[{"text":"x"}]}}`); code != -32602 ||
		!strings.Contains(body, "duplicate field message.messageId: sent twice") {
		t.Errorf("JSON-RPC SendMessage with messageId twice: %s; want -32602 naming message.messageId", body)
	}
}
