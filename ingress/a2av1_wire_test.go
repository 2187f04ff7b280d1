package ingress_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite the golden files of this package's tests (A2A v1.0 wire: package protocols/a2av1's, "+wireGolden+"; ACP shapes; AgentVault's spec replay)")

// wireGolden is where the A2A v1.0 wire's golden files are: with the
// package that owns the wire (protocols.TestPackageConformance checks them).
var wireGolden = filepath.Join("..", "protocols", "a2av1", "testdata", "wire")

// The request bodies of the specification's examples (§6.1, §6.2, §6.4).
const (
	specSendBody   = `{"message":{"role":"ROLE_USER","parts":[{"text":"What is the weather today?"}],"messageId":"msg-uuid"}}`
	specStreamBody = `{"message":{"role":"ROLE_USER","parts":[{"text":"Write a detailed report on climate change"}],"messageId":"msg-uuid"}}`
	specHelloBody  = `{"message":{"role":"ROLE_USER","parts":[{"text":"Hello"}],"messageId":"msg-uuid"}}`
)

func rpc(id any, method, params string) string {
	b, _ := json.Marshal(id)
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, b, method, params)
}

// wireCase is one HTTP exchange; {{task}} in path or body is the task id
// of the last answer that named one.
type wireCase struct {
	name    string
	method  string
	path    string
	body    string
	version string // A2A-Version header ("" none)
	key     string // API key ("" alice's)
	hdr     []string
}

// TestA2AV1WireGolden runs the v1.0 wire, both bindings, against golden files
// built from the specification's examples: the HTTP status, content type
// and body (SSE: the data of each event) of each exchange, with generated
// ids, timestamps and the server's address replaced by stable
// placeholders. Run with -update to rewrite them.
func TestA2AV1WireGolden(t *testing.T) {
	f := startPipelineWith(t, ingress.WithAuth(aliceAndBob(t)))
	cases := []wireCase{
		{name: "rest_send", method: "POST", path: "/a2a/v1/message:send", body: specSendBody, version: "1.0"},
		{name: "rest_get", method: "GET", path: "/a2a/v1/tasks/{{task}}?historyLength=1", version: "1.0"},
		{name: "rest_stream", method: "POST", path: "/a2a/v1/message:stream", body: specStreamBody, version: "1.0"},
		{name: "rest_subscribe_finished", method: "GET", path: "/a2a/v1/tasks/{{task}}:subscribe", version: "1.0"},
		{name: "rest_cancel_finished", method: "POST", path: "/a2a/v1/tasks/{{task}}:cancel", body: `{}`, version: "1.0"},
		{name: "rest_list", method: "GET", path: "/a2a/v1/tasks?pageSize=1", version: "1.0"},
		{name: "rest_get_unknown", method: "GET", path: "/a2a/v1/tasks/task-uuid", version: "1.0"},
		{name: "rest_get_other_principal", method: "GET", path: "/a2a/v1/tasks/{{task}}", version: "1.0", key: bobKey},
		// :subscribe's 404 names the task in its ErrorInfo (taskId), as
		// GET's above and :cancel's do (it had the timestamp alone).
		{name: "rest_subscribe_unknown", method: "GET", path: "/a2a/v1/tasks/task-uuid:subscribe", version: "1.0"},
		{name: "rest_subscribe_other_principal", method: "GET", path: "/a2a/v1/tasks/{{task}}:subscribe", version: "1.0", key: bobKey},
		{name: "rest_push_config", method: "POST", path: "/a2a/v1/tasks/task-uuid/pushNotificationConfigs",
			body: `{"url":"https://client.example.com/webhook"}`, version: "1.0"},
		{name: "rest_version_not_supported", method: "POST", path: "/a2a/v1/message:send", body: specHelloBody, version: "0.5"},
		{name: "rest_unauthenticated", method: "GET", path: "/a2a/v1/tasks", version: "1.0", key: "-"},
		{name: "jsonrpc_send", method: "POST", path: "/a2a/v1", body: rpc(1, "SendMessage", specSendBody), version: "1.0"},
		{name: "jsonrpc_get", method: "POST", path: "/a2a/v1", body: rpc(2, "GetTask", `{"id":"{{task}}","historyLength":0}`), version: "1.0"},
		{name: "jsonrpc_stream", method: "POST", path: "/a2a/v1", body: rpc("s-1", "SendStreamingMessage", specStreamBody), version: "1.0"},
		{name: "jsonrpc_subscribe_finished", method: "POST", path: "/a2a/v1", body: rpc(3, "SubscribeToTask", `{"id":"{{task}}"}`), version: "1.0"},
		{name: "jsonrpc_cancel_finished", method: "POST", path: "/a2a/v1", body: rpc(4, "CancelTask", `{"id":"{{task}}"}`), version: "1.0"},
		// The finished task replayed by the pipeline's extension; the
		// interface URL with a trailing slash; a body that is not JSON by
		// its Content-Type, a part of a media type the agent does not take.
		{name: "jsonrpc_subscribe_replay", method: "POST", path: "/a2a/v1", body: rpc(15, "SubscribeToTask", `{"id":"{{task}}"}`), version: "1.0",
			hdr: []string{"A2A-Extensions", ingress.A2AReplayExtension}},
		{name: "rest_subscribe_replay", method: "POST", path: "/a2a/v1/tasks/{{task}}:subscribe", version: "1.0",
			hdr: []string{"A2A-Extensions", ingress.A2AReplayExtension}},
		{name: "jsonrpc_trailing_slash", method: "POST", path: "/a2a/v1/", body: rpc(16, "GetTask", `{"id":"{{task}}","historyLength":0}`), version: "1.0"},
		// Params with proto field names (ProtoJSON accepts both).
		{name: "jsonrpc_get_proto_names", method: "POST", path: "/a2a/v1", body: rpc(18, "GetTask", `{"id":"{{task}}","history_length":0}`), version: "1.0"},
		{name: "rest_send_text_plain", method: "POST", path: "/a2a/v1/message:send", body: specHelloBody, version: "1.0",
			hdr: []string{"Content-Type", "text/plain"}},
		{name: "jsonrpc_send_text_plain", method: "POST", path: "/a2a/v1", body: rpc(17, "SendMessage", specHelloBody), version: "1.0",
			hdr: []string{"Content-Type", "text/plain"}},
		{name: "rest_send_unsupported_media", method: "POST", path: "/a2a/v1/message:send", version: "1.0",
			body: `{"message":{"role":"ROLE_USER","parts":[{"raw":"dGNr","mediaType":"application/x-unsupported"}],"messageId":"msg-uuid"}}`},
		{name: "jsonrpc_list", method: "POST", path: "/a2a/v1", body: rpc(5, "ListTasks", `{"pageSize":2}`), version: "1.0"},
		{name: "jsonrpc_get_unknown", method: "POST", path: "/a2a/v1", body: rpc(6, "GetTask", `{"id":"task-uuid"}`), version: "1.0"},
		{name: "jsonrpc_invalid_params", method: "POST", path: "/a2a/v1", body: rpc(7, "SendMessage", `{"message":{"role":"ROLE_USER","parts":[],"messageId":"m"}}`), version: "1.0"},
		{name: "jsonrpc_push_config", method: "POST", path: "/a2a/v1", body: rpc(8, "GetTaskPushNotificationConfig", `{"taskId":"task-uuid","id":"c1"}`), version: "1.0"},
		{name: "jsonrpc_version_not_supported", method: "POST", path: "/a2a/v1", body: rpc(9, "SendMessage", specHelloBody), version: "0.5"},
		{name: "jsonrpc_v03_method", method: "POST", path: "/a2a/v1", body: rpc(10, "message/send", `{"message":{"kind":"message","role":"user","parts":[{"kind":"text","text":"Hello"}],"messageId":"m"}}`), version: "1.0"},
		{name: "jsonrpc_unknown_method", method: "POST", path: "/a2a/v1", body: rpc(11, "NoSuchMethod", `{}`), version: "1.0"},
		{name: "jsonrpc_batch", method: "POST", path: "/a2a/v1", body: "[" + rpc(12, "GetTask", `{"id":"x"}`) + "]", version: "1.0"},
		{name: "v03_endpoint_v1_method", method: "POST", path: "/a2a", body: rpc(13, "SendMessage", specHelloBody)},
		// An interrupted task (the demo asks for input), then its answer.
		{name: "jsonrpc_stream_input_required", method: "POST", path: "/a2a/v1", body: rpc("s-2", "SendStreamingMessage",
			`{"message":{"role":"ROLE_USER","parts":[{"text":"ask:input the weather"}],"messageId":"msg-uuid"}}`), version: "1.0"},
		{name: "rest_get_input_required", method: "GET", path: "/a2a/v1/tasks/{{task}}", version: "1.0"},
		{name: "rest_send_answer", method: "POST", path: "/a2a/v1/message:send",
			body: `{"message":{"role":"ROLE_USER","taskId":"{{task}}","parts":[{"text":"Paris"}],"messageId":"msg-uuid-2"}}`, version: "1.0"},
		{name: "jsonrpc_get_answered", method: "POST", path: "/a2a/v1", body: rpc(14, "GetTask", `{"id":"{{task}}"}`), version: "1.0"},
		// Integers and enums in ProtoJSON's other forms: 32-bit integers
		// as strings, enums by number (the task above, input-required then
		// answered: completed); what ProtoJSON refuses is -32602.
		{name: "jsonrpc_get_proto_numbers", method: "POST", path: "/a2a/v1", body: rpc(19, "GetTask", `{"id":"{{task}}","historyLength":"1"}`), version: "1.0"},
		{name: "jsonrpc_list_proto_numbers", method: "POST", path: "/a2a/v1", body: rpc(20, "ListTasks",
			`{"pageSize":"1","historyLength":"0","status":3}`), version: "1.0"},
		{name: "jsonrpc_send_proto_numbers", method: "POST", path: "/a2a/v1", body: rpc(22, "SendMessage",
			`{"message":{"role":1,"parts":[{"text":"Hello"}],"messageId":"msg-uuid-3"},"configuration":{"historyLength":"0"}}`), version: "1.0"},
		{name: "jsonrpc_list_page_size_not_integer", method: "POST", path: "/a2a/v1", body: rpc(23, "ListTasks", `{"pageSize":"two"}`), version: "1.0"},
		{name: "jsonrpc_list_page_size_out_of_range", method: "POST", path: "/a2a/v1", body: rpc(24, "ListTasks", `{"pageSize":"2147483648"}`), version: "1.0"},
		// HTTP+JSON reads ProtoJSON as JSON-RPC does: a body's members by
		// their proto field names, a query's enum by number; a member by
		// both its names is refused (ProtoJSON's duplicate field), and so
		// is a number naming no TaskState.
		{name: "rest_list_status_number", method: "GET", path: "/a2a/v1/tasks?status=3&pageSize=1&historyLength=0", version: "1.0"},
		{name: "rest_list_status_not_a_value", method: "GET", path: "/a2a/v1/tasks?status=9", version: "1.0"},
		{name: "rest_push_config_duplicate_field", method: "POST", path: "/a2a/v1/tasks/task-uuid/pushNotificationConfigs",
			body: `{"url":"https://client.example.com/webhook","task_id":"task-uuid","taskId":"task-uuid"}`, version: "1.0"},
		{name: "rest_send_proto_names", method: "POST", path: "/a2a/v1/message:send", version: "1.0",
			body: `{"message":{"role":"ROLE_USER","parts":[{"text":"Hello","media_type":"text/plain"}],"message_id":"msg-uuid-4","context_id":"ctx-uuid"},` +
				`"configuration":{"history_length":0,"accepted_output_modes":["text/plain"]}}`},
		{name: "rest_send_duplicate_field", method: "POST", path: "/a2a/v1/message:send", version: "1.0",
			body: `{"message":{"role":"ROLE_USER","parts":[{"text":"Hello"}],"message_id":"msg-uuid-5","messageId":"msg-uuid-5"}}`},
		{name: "jsonrpc_get_duplicate_field", method: "POST", path: "/a2a/v1", body: rpc(25, "GetTask", `{"id":"{{task}}","history_length":0,"historyLength":0}`), version: "1.0"},
	}
	task := ""
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := strings.ReplaceAll(c.path, "{{task}}", task)
			body := strings.ReplaceAll(c.body, "{{task}}", task)
			req, err := http.NewRequest(c.method, f.url+path, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if c.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			if c.version != "" {
				req.Header.Set("A2A-Version", c.version)
			}
			for i := 0; i+1 < len(c.hdr); i += 2 {
				req.Header.Set(c.hdr[i], c.hdr[i+1])
			}
			switch c.key {
			case "":
				req.Header.Set(ingress.HeaderAPIKey, testKey)
			case "-":
			default:
				req.Header.Set(ingress.HeaderAPIKey, c.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			ct := resp.Header.Get("Content-Type")
			var values []any
			if strings.HasPrefix(ct, "text/event-stream") {
				for _, ev := range testkit.MustReadSSE(t, resp.Body) {
					if ev.Data == "" {
						continue
					}
					values = append(values, decodeJSONValue(t, strings.ReplaceAll(ev.Data, f.url, "http://agent.example.com")))
				}
			} else {
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				values = append(values, decodeJSONValue(t, strings.ReplaceAll(string(b), f.url, "http://agent.example.com")))
			}
			if id := taskIDOf(values); id != "" {
				task = id
			}
			request := map[string]any{"method": c.method, "path": c.path, "a2a-version": c.version}
			if len(c.hdr) > 0 {
				request["headers"] = c.hdr
			}
			got := map[string]any{"request": request, "status": resp.StatusCode, "contentType": ct, "body": maskWire(values)}
			if e := resp.Header.Get("A2A-Extensions"); e != "" {
				got["a2a-extensions"] = e
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(got); err != nil {
				t.Fatal(err)
			}
			testkit.Golden(t, filepath.Join(wireGolden, c.name+".json"), buf.Bytes(), *update)
		})
	}
}

func decodeJSONValue(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("answer is not JSON: %v: %q", err, s)
	}
	return v
}

// taskIDOf finds the id of the first task an answer names.
func taskIDOf(values []any) string {
	for _, v := range values {
		m, _ := v.(map[string]any)
		if r, ok := m["result"].(map[string]any); ok {
			m = r
		}
		for _, k := range []string{"task", "statusUpdate", "artifactUpdate"} {
			if o, ok := m[k].(map[string]any); ok {
				if id, ok := o["id"].(string); ok {
					return id
				}
				if id, ok := o["taskId"].(string); ok {
					return id
				}
			}
		}
		if id, ok := m["id"].(string); ok && m["status"] != nil {
			return id
		}
	}
	return ""
}

var idKeys = map[string]bool{"id": true, "taskId": true, "contextId": true, "messageId": true, "artifactId": true, "llm_response_id": true}

// uuidRE matches generated ids: UUIDs, and the demo agent's tool call ids.
var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|call_[0-9a-f]{8}`)

// maskWire replaces generated ids (by order of first appearance), timestamps
// and page tokens with placeholders. JSON-RPC ids and the spec examples'
// fixed ids are kept.
func maskWire(v any) any {
	ids := map[string]string{}
	name := func(s string) string {
		if !uuidRE.MatchString(s) {
			return s
		}
		return uuidRE.ReplaceAllStringFunc(s, func(u string) string {
			if n, ok := ids[u]; ok {
				return n
			}
			ids[u] = fmt.Sprintf("<id-%d>", len(ids)+1)
			return ids[u]
		})
	}
	var walk func(key string, v any) any
	walk = func(key string, v any) any {
		switch t := v.(type) {
		case map[string]any:
			// In key order, so that placeholders are numbered the same way
			// every run.
			for _, k := range slices.Sorted(maps.Keys(t)) {
				t[k] = walk(k, t[k])
			}
			return t
		case []any:
			for i, e := range t {
				t[i] = walk(key, e)
			}
			return t
		case string:
			switch {
			case key == "timestamp":
				return "<timestamp>"
			case key == "nextPageToken" && t != "":
				return "<page-token>"
			case idKeys[key], key == "message":
				return name(t)
			}
		}
		return v
	}
	return walk("", v)
}
