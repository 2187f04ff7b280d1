package acp

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestPartsGolden: data and file parts of an agent's A2A artifact (the
// a2a.stream_event frames a bridge writes) become ACP content blocks:
// plain data an embedded JSON resource, a file URL a resource_link, an
// image's or audio's bytes an image or audio block, a text file's bytes an
// embedded text resource, other bytes an embedded blob; tool data parts
// stay tool calls. Each notification is compared with
// testdata/parts/<case>.golden (-update rewrites them) and read back by
// acp-go-sdk into the block it stands for.
func TestPartsGolden(t *testing.T) {
	hello := "SGVsbG8sIHdvcmxkIQ==" // "Hello, world!"
	for _, tc := range []struct {
		name string
		part map[string]any
		want string // the content block's type (agent_message_chunk), or the update's kind
	}{
		{"data", map[string]any{"kind": "data", "data": map[string]any{"k": "v", "n": 1}}, "resource"},
		{"data_typed", map[string]any{"kind": "data", "data": map[string]any{"rows": []any{1, 2}}, "metadata": map[string]any{"type": "table"}}, "resource"},
		{"tool_call", map[string]any{"kind": "data", "data": map[string]any{"id": "c1", "name": "get_weather", "args": `{"city":"Paris"}`},
			"metadata": map[string]any{"type": e2a.ToolFunctionCall}}, "tool_call"},
		{"file_url", map[string]any{"kind": "file", "file": map[string]any{"uri": "https://files.example.com/a%20b.png", "mimeType": "image/png"}}, "resource_link"},
		{"file_url_named", map[string]any{"kind": "file", "file": map[string]any{"uri": "https://files.example.com/x", "name": "report.pdf"}}, "resource_link"},
		{"file_image", map[string]any{"kind": "file", "file": map[string]any{"bytes": hello, "mimeType": "image/png", "name": "p.png"}}, "image"},
		{"file_audio", map[string]any{"kind": "file", "file": map[string]any{"bytes": hello, "mimeType": "audio/wav"}}, "audio"},
		{"file_text", map[string]any{"kind": "file", "file": map[string]any{"bytes": hello, "mimeType": "text/plain; charset=utf-8", "name": "hello.txt"}}, "resource"},
		{"file_blob", map[string]any{"kind": "file", "file": map[string]any{"bytes": hello, "mimeType": "application/octet-stream", "name": "a b.bin"}}, "resource"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &e2a.Response{RequestID: "req_parts", ResponseKind: e2a.KindA2AStreamEvent, Status: e2a.StatusInProgress}
			body, _ := json.Marshal(e2a.StreamEventBody{Branch: e2a.BranchArtifactUpdate, Payload: map[string]any{
				"kind": "artifact-update", "taskId": "t1", "contextId": "c1",
				"artifact": map[string]any{"artifactId": "a1", "parts": []any{tc.part}}}})
			f.Body = body
			ups, err := Updates(f)
			if err != nil {
				t.Fatal(err)
			}
			var golden bytes.Buffer
			for _, u := range ups {
				b, err := json.Marshal(acpsdk.SessionNotification{SessionId: "s1", Update: u})
				if err != nil {
					t.Fatal(err)
				}
				golden.Write(b)
				golden.WriteByte('\n')
				var back acpsdk.SessionNotification
				if err := json.Unmarshal(b, &back); err != nil {
					t.Fatalf("acp-go-sdk cannot read %s: %v", b, err)
				}
				if got := kindOf(back.Update); got != tc.want {
					t.Errorf("%s: read back as %q, want %q", b, got, tc.want)
				}
			}
			if len(ups) != 1 {
				t.Errorf("%d updates, want 1", len(ups))
			}
			testkit.Golden(t, filepath.Join("testdata", "parts", tc.name+".golden"), golden.Bytes(), *update)
		})
	}
}

// kindOf is an update's content block type (an agent_message_chunk), or
// the update's kind.
func kindOf(u acpsdk.SessionUpdate) string {
	switch {
	case u.AgentMessageChunk != nil:
		c := u.AgentMessageChunk.Content
		switch {
		case c.Text != nil:
			return "text"
		case c.Image != nil:
			return "image"
		case c.Audio != nil:
			return "audio"
		case c.ResourceLink != nil:
			return "resource_link"
		case c.Resource != nil:
			return "resource"
		}
	case u.ToolCall != nil:
		return "tool_call"
	}
	return "other"
}
