package a2abridge

import (
	"encoding/base64"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
)

// userParts are the parts of the user message a request sends to the
// agent: an A2A client's parts as sent when their order is kept
// (a2amap.SentParts: several text parts, parts in another order, a text
// part's metadata); else its text (bridge.UserText), then its files and
// data parts as the normalizers keep them (a2amap.ParamParts), or, when
// it has none, the non-text blocks of an ACP prompt (image, audio,
// resource_link, resource).
func userParts(env *e2a.Envelope) a2a.ContentParts {
	if parts, ok := a2amap.SentParts(env); ok {
		return parts
	}
	var parts a2a.ContentParts
	if text := bridge.UserText(env); text != "" {
		parts = append(parts, a2a.NewTextPart(text))
	}
	n := len(parts)
	parts = append(parts, a2amap.ParamParts(env)...)
	if len(parts) > n {
		return parts
	}
	blocks := a2amap.Objects(env.PromptBlocks())
	for _, b := range blocks {
		if p := blockPart(b); p != nil {
			parts = append(parts, p)
		}
	}
	return parts
}

// blockPart is an ACP content block that is not text: an image or audio
// block's bytes, a resource link's URL, an embedded resource's text or
// blob. Its media type is mimeType, or mime_type as E2A spells it (spec
// §11.5's image block).
func blockPart(b map[string]any) *a2a.Part {
	mime, _ := b["mimeType"].(string)
	if mime == "" {
		mime, _ = b["mime_type"].(string)
	}
	switch b["type"] {
	case "image", "audio":
		data, _ := b["data"].(string)
		raw, err := base64.StdEncoding.DecodeString(data)
		if err != nil || data == "" {
			return nil
		}
		p := a2a.NewRawPart(raw)
		p.MediaType = mime
		return p
	case "resource_link":
		uri, _ := b["uri"].(string)
		if uri == "" {
			return nil
		}
		p := a2a.NewFileURLPart(a2a.URL(uri), mime)
		p.Filename, _ = b["name"].(string)
		return p
	case "resource":
		r, _ := b["resource"].(map[string]any)
		mime, _ = r["mimeType"].(string)
		var raw []byte
		if s, ok := r["text"].(string); ok {
			raw = []byte(s)
		} else if s, ok := r["blob"].(string); ok {
			var err error
			if raw, err = base64.StdEncoding.DecodeString(s); err != nil {
				return nil
			}
		} else {
			return nil
		}
		p := a2a.NewRawPart(raw)
		p.MediaType = mime
		if uri, _ := r["uri"].(string); uri != "" {
			p.Filename = uri[strings.LastIndexByte(uri, '/')+1:]
		}
		return p
	}
	return nil
}
