package a2av1_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
)

var v1Header = map[string]string{"A2A-Version": "1.0"}

// finishedTask runs one message to its end through the HTTP+JSON
// message:stream (echoAgent's answer, a task) and returns the task's id.
func finishedTask(t *testing.T, p *pipetest.Pipeline) string {
	t.Helper()
	status, _, body := rawCall(t, "POST", p.URL+a2av1.Path+"/message:stream",
		`{"message":{"role":"ROLE_USER","messageId":"`+time.Now().Format(time.RFC3339Nano)+`","parts":[{"text":"x"}]}}`, v1Header)
	i := strings.Index(body, "data: ")
	if status != http.StatusOK || i < 0 {
		t.Fatalf("message:stream: %d %.300s", status, body)
	}
	line, _, _ := strings.Cut(body[i+len("data: "):], "\n")
	var ev struct {
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Task.ID == "" {
		t.Fatalf("message:stream's first event %q: %v", line, err)
	}
	return ev.Task.ID
}

// restErrorReason is the status and ErrorInfo reason of an HTTP+JSON
// error answer (google.rpc.Status), "" when body is none.
func restErrorReason(body string) (status, reason string) {
	var st struct {
		Error struct {
			Status  string `json:"status"`
			Details []struct {
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(body), &st) != nil {
		return "", ""
	}
	for _, d := range st.Error.Details {
		if d.Reason != "" {
			reason = d.Reason
		}
	}
	return st.Error.Status, reason
}

// TestRESTStreamRefusalIsHTTPError: an HTTP+JSON message:stream refused
// before its first event (a message to a finished task, to an unknown
// task, invalid params) is the HTTP error answer, as message:send's and
// tasks/{id}:subscribe's are, not 200 text/event-stream whose one event is
// the error. A2A v1.0 §11.6: "HTTP error responses use the
// google.rpc.Status JSON representation ... Error Code: Mapped to the HTTP
// status code and the error.code field"; §5.4: "All A2A-specific errors
// ... MUST be mapped to binding-specific error representations"
// (TaskNotFoundError 404, UnsupportedOperationError 400); §3.1.2 lists
// both as the operation's errors. a2a-go/v2's REST client still reads the
// error's kind.
func TestRESTStreamRefusalIsHTTPError(t *testing.T) {
	p := echoPipeline(t)
	done := finishedTask(t, p)
	for _, c := range []struct {
		name, body string
		status     int
		reason     string
	}{
		{"finished task", `{"message":{"role":"ROLE_USER","messageId":"f1","taskId":"` + done + `","parts":[{"text":"x"}]}}`,
			http.StatusBadRequest, "UNSUPPORTED_OPERATION"},
		{"unknown task", `{"message":{"role":"ROLE_USER","messageId":"u1","taskId":"no-such-task","parts":[{"text":"x"}]}}`,
			http.StatusNotFound, "TASK_NOT_FOUND"},
		{"null part", `{"message":{"role":"ROLE_USER","messageId":"n1","parts":[{"text":"a"},null]}}`,
			http.StatusBadRequest, "INVALID_PARAMS"},
	} {
		status, hdr, body := rawCall(t, "POST", p.URL+a2av1.Path+"/message:stream", c.body, v1Header)
		if _, reason := restErrorReason(body); status != c.status || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") ||
			reason != c.reason {
			t.Errorf("%s: answered %d %s %.300s; want %d application/json, reason %s", c.name, status, hdr.Get("Content-Type"), body,
				c.status, c.reason)
		}
	}
	c := restClient(t, p.URL+a2av1.Path, "")
	req := hi()
	req.Message.TaskID = "no-such-task"
	var err error
	for _, err = range c.SendStreamingMessage(context.Background(), req) {
		if err != nil {
			break
		}
	}
	if !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("a2a-go/v2 REST client, unknown task: %v; want ErrTaskNotFound", err)
	}
}

// pushConfigsTask is a pipeline with push configs, and a finished task of
// it with the configs ids (their URL http://127.0.0.1:1/hook).
func pushConfigsTask(t *testing.T, ids ...string) (*pipetest.Pipeline, string) {
	t.Helper()
	p := pipetest.Start(t, pipetest.WithPush("127.0.0.1"), pipetest.WithIngress(ingress.WithDefaultPool("demo")))
	p.Pool("demo", echoAgent())
	id := finishedTask(t, p)
	for _, cfg := range ids {
		if _, code, body := rpcCall(t, p, "CreateTaskPushNotificationConfig",
			`{"taskId":"`+id+`","id":"`+cfg+`","url":"http://127.0.0.1:1/hook"}`); code != 0 {
			t.Fatalf("create %s: %s", cfg, body)
		}
	}
	return p, id
}

// TestDeletePushConfigHasResult: the JSON-RPC answer to
// DeleteTaskPushNotificationConfig has a result. JSON-RPC 2.0 §5: "result:
// This member is REQUIRED on success"; the method returns
// google.protobuf.Empty (a2a.proto), whose JSON is {}. The SDK answered
// {"jsonrpc":"2.0","id":1}. a2a-go/v2's JSON-RPC client still accepts it.
func TestDeletePushConfigHasResult(t *testing.T) {
	p, id := pushConfigsTask(t, "c1", "c2")
	_, _, body := rawCall(t, "POST", p.URL+a2av1.Path,
		`{"jsonrpc":"2.0","id":7,"method":"DeleteTaskPushNotificationConfig","params":{"taskId":"`+id+`","id":"c1"}}`, v1Header)
	var resp map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &resp); err != nil || string(resp["result"]) != "{}" || string(resp["id"]) != "7" {
		t.Errorf("delete: answered %q; want {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}", body)
	}
	c := rpcClient(t, p.URL+a2av1.Path, "")
	if err := c.DeleteTaskPushConfig(context.Background(), &a2a.DeleteTaskPushConfigRequest{TaskID: a2a.TaskID(id), ID: "c2"}); err != nil {
		t.Errorf("a2a-go/v2 JSON-RPC client: delete: %v", err)
	}
	if _, code, body := rpcCall(t, p, "GetTaskPushNotificationConfig", `{"taskId":"`+id+`","id":"c2"}`); code != -32001 {
		t.Errorf("get after the client's delete: %s; want TaskNotFound (the config is gone)", body)
	}
}

// TestRESTDeletePushConfigAnswersEmptyObject: the HTTP+JSON binding's
// DELETE /tasks/{id}/pushNotificationConfigs/{configId} answers 200 with
// the JSON of google.protobuf.Empty, {}, the method's result (a2a.proto),
// as the JSON-RPC binding's result is {} (TestDeletePushConfigHasResult).
// The SDK's handler wrote 200 with Content-Type application/json and no
// body, which a2a-python's HTTP+JSON client, decoding every answer, took
// for a JSON decode error after the config had been deleted.
func TestRESTDeletePushConfigAnswersEmptyObject(t *testing.T) {
	p, id := pushConfigsTask(t, "c1", "c2")
	status, hdr, body := rawCall(t, "DELETE", p.URL+a2av1.Path+"/tasks/"+id+"/pushNotificationConfigs/c1", "", v1Header)
	if status != http.StatusOK || strings.TrimSpace(body) != "{}" || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Errorf("DELETE: %d %q (%s); want 200 {} (application/json)", status, body, hdr.Get("Content-Type"))
	}
	if _, code, body := rpcCall(t, p, "GetTaskPushNotificationConfig", `{"taskId":"`+id+`","id":"c1"}`); code != -32001 {
		t.Errorf("get after the DELETE: %s; want TaskNotFound (the config is gone)", body)
	}
	// A config already gone is deleted again without error (§3.1.10), as {}.
	if status, _, body := rawCall(t, "DELETE", p.URL+a2av1.Path+"/tasks/"+id+"/pushNotificationConfigs/c1", "", v1Header); status != http.StatusOK || strings.TrimSpace(body) != "{}" {
		t.Errorf("DELETE again: %d %q; want 200 {}", status, body)
	}
	// An error is answered as it was.
	if status, _, body := rawCall(t, "DELETE", p.URL+a2av1.Path+"/tasks/no-such-task/pushNotificationConfigs/c2", "", v1Header); status != http.StatusNotFound || !strings.Contains(body, "TASK_NOT_FOUND") {
		t.Errorf("DELETE of an unknown task's config: %d %q; want 404 TASK_NOT_FOUND", status, body)
	}
	c := restClient(t, p.URL+a2av1.Path, "")
	if err := c.DeleteTaskPushConfig(context.Background(), &a2a.DeleteTaskPushConfigRequest{TaskID: a2a.TaskID(id), ID: "c2"}); err != nil {
		t.Errorf("a2a-go/v2 HTTP+JSON client: delete: %v", err)
	}
}

// TestEmptyTaskIDInvalidParams: GetTask, CancelTask and SubscribeToTask
// without the task's id (REQUIRED in a2a.proto: field_behavior) are
// InvalidParams on every binding: -32602, HTTP 400 INVALID_ARGUMENT, gRPC
// INVALID_ARGUMENT (what gRPC already answered). A2A v1.0 §3.3.2:
// "Validation Errors: Invalid input parameters ... Servers MUST validate
// all input parameters before processing ... Example error codes: HTTP 400
// Bad Request, gRPC INVALID_ARGUMENT, JSON-RPC -32602 Invalid params". They
// were TaskNotFoundError (-32001, 404).
func TestEmptyTaskIDInvalidParams(t *testing.T) {
	p := echoPipeline(t)
	for _, m := range []string{"GetTask", "CancelTask", "SubscribeToTask"} {
		for _, params := range []string{`{}`, `{"id":""}`} {
			if _, code, body := rpcCall(t, p, m, params); code != -32602 || !strings.HasPrefix(body, "{") {
				t.Errorf("JSON-RPC %s %s: answered %.300s; want one answer, error -32602", m, params, body)
			}
		}
	}
	for _, c := range []struct{ method, path string }{
		{"POST", "/tasks/:cancel"}, {"POST", "/tasks/:subscribe"}, {"GET", "/tasks/:subscribe"},
	} {
		status, _, body := rawCall(t, c.method, p.URL+a2av1.Path+c.path, "", v1Header)
		if st, reason := restErrorReason(body); status != http.StatusBadRequest || st != "INVALID_ARGUMENT" || reason != "INVALID_PARAMS" {
			t.Errorf("HTTP+JSON %s %s: answered %d %.300s; want 400 INVALID_ARGUMENT, reason INVALID_PARAMS", c.method, c.path, status, body)
		}
	}
	conn, err := grpc.NewClient(p.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	g := a2apb.NewA2AServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = g.GetTask(ctx, &a2apb.GetTaskRequest{})
	check := func(m string, err error) {
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("gRPC %s without id: %v; want INVALID_ARGUMENT", m, err)
		}
	}
	check("GetTask", err)
	_, err = g.CancelTask(ctx, &a2apb.CancelTaskRequest{})
	check("CancelTask", err)
	s, err := g.SubscribeToTask(ctx, &a2apb.SubscribeToTaskRequest{})
	if err == nil {
		_, err = s.Recv()
	}
	check("SubscribeToTask", err)
}

// TestV1RoleMessage: a message whose role is missing or spelled as v0.3
// spells it ("user") is InvalidParams whose message names v1.0's values,
// ROLE_USER and ROLE_AGENT (a2a.proto's enum Role; §5.5 ProtoJSON enum
// names), on the v1.0 bindings: it said `message.role must be "user" or
// "agent"`, the v0.3 values this interface refuses. §3.3.2: "Servers
// SHOULD provide guidance on valid parameter values or formats".
func TestV1RoleMessage(t *testing.T) {
	p := echoPipeline(t)
	for _, role := range []string{``, `"role":"user",`, `"role":"ROLE_UNSPECIFIED",`} {
		msg := `{"message":{` + role + `"messageId":"r1","parts":[{"text":"x"}]}}`
		for _, m := range []string{"SendMessage", "SendStreamingMessage"} {
			_, code, body := rpcCall(t, p, m, msg)
			if code != -32602 || !strings.Contains(body, "ROLE_USER") || !strings.Contains(body, "ROLE_AGENT") {
				t.Errorf("JSON-RPC %s %s: answered %.300s; want -32602 naming ROLE_USER and ROLE_AGENT", m, msg, body)
			}
		}
		for _, route := range []string{"/message:send", "/message:stream"} {
			status, _, body := rawCall(t, "POST", p.URL+a2av1.Path+route, msg, v1Header)
			if status != http.StatusBadRequest || !strings.Contains(body, "ROLE_USER") {
				t.Errorf("HTTP+JSON %s %s: answered %d %.300s; want 400 naming ROLE_USER", route, msg, status, body)
			}
		}
	}
	conn, err := grpc.NewClient(p.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g := a2apb.NewA2AServiceClient(conn)
	req := &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "r2", Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "x"}}}}}
	_, err = g.SendMessage(ctx, req)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "ROLE_USER") {
		t.Errorf("gRPC SendMessage without role: %v; want INVALID_ARGUMENT naming ROLE_USER", err)
	}
	s, err := g.SendStreamingMessage(ctx, req)
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "ROLE_USER") {
		t.Errorf("gRPC SendStreamingMessage without role: %v; want INVALID_ARGUMENT naming ROLE_USER", err)
	}
}
