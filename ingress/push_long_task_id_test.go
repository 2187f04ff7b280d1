package ingress_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestPushInlineConfigOnLongTaskID: a new A2A task's id is its request
// id, which an Idempotency-Key of up to subjects.MaxIDLength (1024 bytes)
// names. The pipeline accepts such a message, and its inline
// taskPushNotificationConfig too: push.Config.check capped task ids at
// 256 bytes, refusing it as invalid params, so a task the pipeline made
// could never get a webhook.
func TestPushInlineConfigOnLongTaskID(t *testing.T) {
	pt := pipetest.Start(t, pipetest.WithPush("127.0.0.1"), pipetest.WithIngress(ingress.WithAuth(aliceAndBob(t))))
	pt.Pool("demo", demo.New())
	send := func(task string, push bool) (int, string) {
		cfg := ""
		if push {
			cfg = `,"configuration":{"taskPushNotificationConfig":{"url":"http://127.0.0.1:9/hook","token":"tok"}}`
		}
		return keyCall(t, pt.URL+"/a2a/v1", task, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER",`+
			`"messageId":"m-`+task[:8]+`","parts":[{"text":"hello"}]}`+cfg+`}}`, "A2A-Version", "1.0")
	}
	long := "long-" + strings.Repeat("k", 300)
	if code, body := send(long+"-plain", false); code != http.StatusOK || strings.Contains(body, `"error"`) {
		t.Fatalf("a message whose request id is %d bytes: %d %.300s", len(long)+6, code, body)
	}
	if code, body := send("short-task-id", true); code != http.StatusOK || strings.Contains(body, `"error"`) {
		t.Fatalf("a message with an inline push config: %d %.300s", code, body)
	}
	if code, body := send(long+"-push", true); code != http.StatusOK || strings.Contains(body, `"error"`) {
		t.Errorf("the same message with an inline push config on its %d-byte task id: %d %.400s, want its task", len(long)+5, code, body)
	}
}
