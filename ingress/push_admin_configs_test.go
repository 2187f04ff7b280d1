package ingress_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/ingress"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
)

// TestPushAdminConfigOnOwnersTaskDelivered: an admin (ops) may act on
// alice's task; its CreateTaskPushNotificationConfig on it is a config of
// the task, posted the task's next updates. It was filed under ops, where
// the push stage never looks for alice's task: accepted and never called.
func TestPushAdminConfigOnOwnersTaskDelivered(t *testing.T) {
	a := startAliceAsked(t)
	ctx, task, r := a.ctx, a.task, a.r
	if _, err := a.ops.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "ops", URL: r.URL + "/ops", Token: "tok-ops"}); err != nil {
		t.Fatalf("the admin's CreateTaskPushNotificationConfig on alice's task: %v", err)
	}
	res, err := a.alice.SendMessage(ctx, up.Reply(task, "sunny"))
	if done, ok := res.(*a2a.Task); err != nil || !ok || done.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("alice's answer: %T %+v %v", res, res, err)
	}
	r.Await(t, 20*time.Second, "/v1", string(a2a.TaskStateCompleted)) // alice's own config got the turn
	r.Await(t, 10*time.Second, "/ops", string(a2a.TaskStateCompleted))
}

// TestPushAdminDeleteOfOwnersConfig: an admin (ops) deletes alice's config
// "v1" of her task: it is gone for alice too. The delete answered success
// and left it (listed, and still posted to).
func TestPushAdminDeleteOfOwnersConfig(t *testing.T) {
	a := startAliceAsked(t)
	ctx, task := a.ctx, a.task
	if err := a.ops.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "v1"}); err != nil {
		t.Fatalf("the admin's DeleteTaskPushNotificationConfig of alice's config: %v", err)
	}
	if _, err := a.alice.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "v1"}); err == nil {
		t.Errorf("the admin's DeleteTaskPushNotificationConfig of alice's config v1 answered success, but alice's config v1 is still there (and delivered to)")
	}
}

// TestPushMalformedConfigsRefused: malformed push
// configs (bad URLs, a scheme other than Bearer/Basic, header-breaking
// token or credentials, a huge body, broken JSON) on every door are the
// protocol's invalid-params/parse/too-large answers, never a 5xx or a
// stored config.
func TestPushMalformedConfigsRefused(t *testing.T) {
	p := startPushPipeline(t)
	c := keyClient(t, p, a2a.TransportProtocolJSONRPC, testKey)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.SendMessage(ctx, userMessage("hello"))
	if err != nil {
		t.Fatal(err)
	}
	task := string(res.(*a2a.Task).ID)
	post := func(path, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, p.url+path, strings.NewReader(body))
		req.Header.Set(ingress.HeaderAPIKey, testKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", "1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	rpc := func(path, method, params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	}
	big := strings.Repeat("x", 5<<20)
	for _, tc := range []struct{ path, body, want string }{
		{"/a2a/v1", rpc("", "CreateTaskPushNotificationConfig", `{"taskId":"`+task+`","id":"a","url":"not a url"}`), `"code":-32602`},
		{"/a2a/v1", rpc("", "CreateTaskPushNotificationConfig", `{"taskId":"`+task+`","id":"a","url":"http://[::1"}`), `"code":-32602`},
		{"/a2a/v1", rpc("", "CreateTaskPushNotificationConfig", `{"taskId":"`+task+`","id":"a","url":"https://10.0.0.1/x"}`), `"code":-32602`},
		{"/a2a/v1", rpc("", "CreateTaskPushNotificationConfig", `{"taskId":"`+task+`","id":"a","url":"https://u:p@example.com/x"}`), `"code":-32602`},
		{"/a2a/v1", rpc("", "CreateTaskPushNotificationConfig", `{"taskId":"`+task+`","id":"a","url":"ftp://example.com/x"}`), `"code":-32602`},
		{"/a2a/v1", rpc("", "CreateTaskPushNotificationConfig", `{"taskId":"`+task+`","id":"a","url":"http://127.0.0.1:1/x","authentication":{"scheme":"Digest","credentials":"x"}}`), `"code":-32602`},
		{"/a2a/v1", rpc("", "CreateTaskPushNotificationConfig", `{"taskId":"`+task+`","id":"a","url":"http://127.0.0.1:1/x","token":"a\r\nX-Evil: 1"}`), `"code":-32602`},
		{"/a2a/v1", rpc("", "CreateTaskPushNotificationConfig", `{"taskId":"`+task+`","id":"a","url":"http://127.0.0.1:1/x","authentication":{"scheme":"Bearer","credentials":"a\nb"}}`), `"code":-32602`},
		{"/a2a/v1", rpc("", "CreateTaskPushNotificationConfig", `{"taskId":"`+task+`","id":"a","url":"http://127.0.0.1:1/`+strings.Repeat("a", 3000)+`"}`), `"code":-32602`},
		{"/a2a/v1", rpc("", "CreateTaskPushNotificationConfig", `{"taskId":"`+task+`","id":"a","url":"http://127.0.0.1:1/x","metadata":"`+big+`"}`), `-32600`},
		{"/a2a/v1", rpc("", "ListTaskPushNotificationConfigs", `{"taskId":"`+task+`","pageToken":"garbage"}`), `"code":-32602`},
		{"/a2a/v1/tasks/" + task + "/pushNotificationConfigs", `{"id":"r3",`, `INVALID_ARGUMENT`},
		{"/a2a/v1/tasks/" + task + "/pushNotificationConfigs", `{"id":"r5","url":"http://127.0.0.1:1/r","token":"` + strings.Repeat("x", 5000) + `"}`, `INVALID_ARGUMENT`},
		{"/a2a", rpc("", "tasks/pushNotificationConfig/set", `{"taskId":"`+task+`","pushNotificationConfig":"x"}`), `"code":-32602`},
		{"/a2a", rpc("", "tasks/pushNotificationConfig/set", `{"taskId":"`+task+`"}`), `"code":-32602`},
		{"/a2a", rpc("", "tasks/pushNotificationConfig/get", `[1,2]`), `"code":-32602`},
		{"/a2a", rpc("", "tasks/pushNotificationConfig/set", `{"taskId":"`+task+`","pushNotificationConfig":{"url":"http://127.0.0.1:1/v","authentication":{"schemes":[],"credentials":"c"}}}`), `"code":-32602`},
	} {
		code, body := post(tc.path, tc.body)
		if code >= 500 || !strings.Contains(body, tc.want) {
			t.Errorf("POST %s %.100s: %d %.300s, want %s", tc.path, tc.body, code, body, tc.want)
		}
	}
	list, err := c.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: a2a.TaskID(task)})
	if err != nil || len(list) != 0 {
		t.Errorf("configs stored by refused creates: %+v %v", list, err)
	}
}
