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

// TestUserPartsReachAgentAsSent: an A2A client's message of several parts
// reaches the A2A agent behind the pool with its parts as sent (in their
// order, a text part's metadata kept), as the task's history shows it.
// The bridge sent the text parts joined, then the files, then the data
// parts: [text "second\nfourth", data] for [data, text, text].
func TestUserPartsReachAgentAsSent(t *testing.T) {
	t.Parallel()
	srv := up.Start(t, up.Options{Binding: up.JSONRPC})
	p := pipetest.Start(t)
	bridgePool(t, p, "agent", srv.BaseURL())
	c := v1Client(t, p, "agent")
	msg := userMessage("echo parts")
	second := a2a.NewTextPart("second")
	second.Metadata = map[string]any{"k": "t"}
	msg.Parts = a2a.ContentParts{a2a.NewDataPart(map[string]any{"first": 1.0}), second, a2a.NewTextPart("fourth")}
	if _, err := c.SendMessage(testCtx(t), &a2a.SendMessageRequest{Message: msg}); err != nil {
		t.Fatal(err)
	}
	got := srv.LastMessage()
	if got == nil || len(got.Parts) != 3 || got.Parts[0].Data() == nil || got.Parts[1].Text() != "second" ||
		got.Parts[1].Metadata["k"] != "t" || got.Parts[2].Text() != "fourth" {
		var parts a2a.ContentParts
		if got != nil {
			parts = got.Parts
		}
		t.Errorf("the agent got parts %+v; want [data {first:1}, text second (metadata k:t), text fourth]", parts)
	}
}
