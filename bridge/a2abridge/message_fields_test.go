package a2abridge_test

import (
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestUserMessageMetadataAndExtensionsReachAgent: the A2A client's
// message metadata and extensions (A2A Message.metadata, .extensions) go
// to the agent behind the pool with the message ("unchanged"), as the
// pipeline keeps them in the task's history. They were dropped: the agent
// got an empty metadata and no extension.
func TestUserMessageMetadataAndExtensionsReachAgent(t *testing.T) {
	t.Parallel()
	srv := up.Start(t, up.Options{Binding: up.JSONRPC})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", srv.BaseURL())
	c := v1Client(t, p, "agent")
	msg := userMessage("echo meta")
	msg.Metadata["trace_tag"] = "t-1"
	msg.Extensions = []string{"https://example.com/ext/v1"}
	if _, err := c.SendMessage(testCtx(t), &a2a.SendMessageRequest{Message: msg}); err != nil {
		t.Fatal(err)
	}
	got := srv.LastMessage()
	if got == nil || got.Metadata["trace_tag"] != "t-1" || !slices.Contains(got.Extensions, "https://example.com/ext/v1") {
		var md any
		var ext []string
		if got != nil {
			md, ext = got.Metadata, got.Extensions
		}
		t.Errorf("the agent got metadata %v extensions %v; want the client's trace_tag t-1 and extension", md, ext)
	}
}
