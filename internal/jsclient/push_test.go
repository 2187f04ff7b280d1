package jsclient

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/pushtest"
)

// pushSummary is what client.mjs push prints.
type pushSummary struct {
	TaskID      string `json:"task_id"`
	CreatedID   string `json:"created_id"`
	GotURL      string `json:"got_url"`
	Listed      int    `json:"listed"`
	AfterDelete int    `json:"after_delete"`
}

// pushPipeline is pipeline with the push config store and the push stage
// (loopback allow-listed).
func pushPipeline(t *testing.T) string {
	t.Helper()
	p := pipetest.Start(t, pipetest.WithPush("127.0.0.1"))
	p.Pool(demo.Pool, demo.New())
	return p.URL
}

// TestA2AJavaScriptPush: @a2a-js/sdk 1.3.0's client over JSON-RPC sends
// a message with an inline taskPushNotificationConfig (the receiver gets
// the task's updates, the completed status last, each with the token),
// then creates, gets, lists and deletes a second config of the task.
func TestA2AJavaScriptPush(t *testing.T) {
	installed(t)
	base := pushPipeline(t)
	recv := pushtest.NewReceiver(t)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "client.mjs", base, "push", "JSONRPC", recv.URL+"/hook")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs push: %v\n%s", err, stderr.String())
	}
	var s pushSummary
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	if s.TaskID == "" || s.CreatedID != "js-second" || s.GotURL != recv.URL+"/hook/second" || s.Listed != 2 || s.AfterDelete != 1 {
		t.Fatalf("summary %+v", s)
	}
	for i, d := range recv.Await(t, 20*time.Second, "/hook", "TASK_STATE_COMPLETED") {
		if d.Token != "js-token" {
			t.Fatalf("delivery %d token %q", i, d.Token)
		}
	}
}
