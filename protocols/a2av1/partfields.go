package a2av1

import (
	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/normalizer"
)

// Keys of a text block of params.content_blocks and of a params.data_parts
// element that hold a v1.0 text or data part's mediaType and filename, as
// a file's do (a content block's resource_link: mimeType, name; params.files:
// mime_type, name). a2amap.SentParts reads them back.
const (
	blockMediaType = "mimeType"
	blockFilename  = "name"
	dataMediaType  = "mime_type"
	dataFilename   = "name"
)

// keepPartFields puts in params (the envelope's, of a message of parts
// normalized by the v0.3 adapter) the mediaType and filename of its text
// and data parts, which v0.3's text and data parts do not have, so the
// SDK's conversion dropped them: neither the agent nor the task's history
// saw them. A message with none is left as it is. With one, params gets
// part_order (the history is then rebuilt part by part) and, for a
// message of one plain text part, the content block of that part.
func keepPartFields(params map[string]any, parts []*a2a.Part) {
	need := false
	order := make([]byte, 0, len(parts))
	for _, p := range parts {
		switch p.Content.(type) {
		case a2a.Text:
			order = append(order, 't')
			need = need || p.MediaType != "" || p.Filename != ""
		case a2a.Data:
			order = append(order, 'd')
			need = need || p.MediaType != "" || p.Filename != ""
		default:
			order = append(order, 'f')
		}
	}
	if !need || params == nil {
		return
	}
	if _, has := params["content_blocks"]; !has {
		if s, ok := params["text"].(string); ok && len(order) == 1 {
			params["content_blocks"] = []any{map[string]any{"type": "text", "text": s}}
		}
	}
	var texts, data []map[string]any
	blocks, _ := params["content_blocks"].([]any)
	for _, b := range blocks {
		if m, ok := b.(map[string]any); ok && m["type"] == "text" {
			texts = append(texts, m)
		}
	}
	dps, _ := params["data_parts"].([]any)
	for _, d := range dps {
		if m, ok := d.(map[string]any); ok {
			data = append(data, m)
		}
	}
	for _, p := range parts {
		var into map[string]any
		var mtKey, nameKey string
		switch p.Content.(type) {
		case a2a.Text:
			if len(texts) == 0 {
				return // not the parts params holds: left as the adapter wrote it
			}
			into, texts, mtKey, nameKey = texts[0], texts[1:], blockMediaType, blockFilename
		case a2a.Data:
			if len(data) == 0 {
				return
			}
			into, data, mtKey, nameKey = data[0], data[1:], dataMediaType, dataFilename
		default:
			continue
		}
		if p.MediaType != "" {
			into[mtKey] = p.MediaType
		}
		if p.Filename != "" {
			into[nameKey] = p.Filename
		}
	}
	params[normalizer.PartOrder] = string(order)
}
