package a2abridge_test

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	up "github.com/e2a-pipeline/pipeline/internal/a2aupstream"
	"github.com/e2a-pipeline/pipeline/internal/jsupstream"
)

// acpData is the JSON of an agent_message_chunk's embedded resource of
// mimeType application/json (a data part).
func acpData(u acp.SessionUpdate) (any, bool) {
	c := u.AgentMessageChunk
	if c == nil || c.Content.Resource == nil || c.Content.Resource.Resource.TextResourceContents == nil {
		return nil, false
	}
	r := c.Content.Resource.Resource.TextResourceContents
	if r.MimeType == nil || *r.MimeType != "application/json" {
		return nil, false
	}
	var v any
	if json.Unmarshal([]byte(r.Text), &v) != nil {
		return nil, false
	}
	return v, true
}

// TestACPFiles: an agent's file artifacts (a2a-go/v2, @a2a-js/sdk) reach
// an ACP client (acp-go-sdk over stdio) through the bridge: the text
// file's bytes as an embedded text resource named after the file, the
// image URL as a resource_link with its mimeType.
func TestACPFiles(t *testing.T) {
	t.Parallel()
	for _, u := range []upstreamKind{
		{"go-jsonrpc", goAgent(up.Options{Binding: up.JSONRPC})},
		{"js", jsAgent(jsupstream.Options{})},
		{"js-rest", jsAgent(jsupstream.Options{Binding: up.HTTPJSON})},
		{"js-grpc", jsAgent(jsupstream.Options{Binding: up.GRPC})},
	} {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			_, p := u.bridged(t)
			c := openACP(t, p, "agent").(*acpConv)
			body := "files of " + u.name
			if s := c.prompt(t, "file: "+body); s.state != "completed" {
				t.Fatalf("file: %s %q", s.state, s.message)
			}
			var text, link bool
			for _, upd := range c.last {
				m := upd.AgentMessageChunk
				if m == nil {
					continue
				}
				if r := m.Content.Resource; r != nil && r.Resource.TextResourceContents != nil {
					tr := r.Resource.TextResourceContents
					text = tr.Text == string(up.FileBytes(body)) && tr.Uri == "urn:e2a:file:"+up.FileName &&
						tr.MimeType != nil && *tr.MimeType == up.FileMIME
					if !text {
						t.Errorf("the text file: %+v", tr)
					}
				}
				if l := m.Content.ResourceLink; l != nil {
					link = l.Uri == up.FileURL(body) && l.MimeType != nil && *l.MimeType == up.FileURLMIME
					if !link {
						t.Errorf("the file URL: %+v", l)
					}
				}
				if r := m.Content.Resource; r != nil && r.Resource.BlobResourceContents != nil {
					b, _ := base64.StdEncoding.DecodeString(r.Resource.BlobResourceContents.Blob)
					t.Errorf("the text file came as a blob: %q", b)
				}
			}
			if !text || !link {
				t.Errorf("text file %v, file URL %v; want both", text, link)
			}
		})
	}
}
