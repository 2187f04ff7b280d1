package a2abridge

import (
	"encoding/base64"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// userParts are the parts of the user message a request sends to the
// agent: its text (bridge.UserText), then its files and data parts as the
// normalizers keep them (params.files: {uri, name, mime_type}, bytes as a
// data: URI; params.data_parts: {data, metadata}), or, when it has none,
// the non-text blocks of an ACP prompt (image, audio, resource_link,
// resource).
func userParts(env *e2a.Envelope) a2a.ContentParts {
	var parts a2a.ContentParts
	if text := bridge.UserText(env); text != "" {
		parts = append(parts, a2a.NewTextPart(text))
	}
	n := len(parts)
	for _, f := range objects(env.Params["files"]) {
		if p := filePart(f); p != nil {
			parts = append(parts, p)
		}
	}
	for _, d := range objects(env.Params["data_parts"]) {
		if v, ok := d["data"]; ok {
			p := a2a.NewDataPart(v)
			p.Metadata, _ = d["metadata"].(map[string]any)
			parts = append(parts, p)
		}
	}
	if len(parts) > n {
		return parts
	}
	blocks := objects(env.Params["prompt"])
	if len(blocks) == 0 {
		blocks = objects(env.Params["content_blocks"])
	}
	for _, b := range blocks {
		if p := blockPart(b); p != nil {
			parts = append(parts, p)
		}
	}
	return parts
}

// objects is v's JSON objects, when v is an array.
func objects(v any) []map[string]any {
	arr, _ := v.([]any)
	var out []map[string]any
	for _, e := range arr {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// filePart is a file of params.files: its bytes when its uri is a base64
// data: URI, else its URL.
func filePart(f map[string]any) *a2a.Part {
	uri, _ := f["uri"].(string)
	if uri == "" {
		return nil
	}
	name, _ := f["name"].(string)
	mime, _ := f["mime_type"].(string)
	var p *a2a.Part
	if b, mt, ok := dataURI(uri); ok {
		p = a2a.NewRawPart(b)
		if mime == "" {
			mime = mt
		}
	} else {
		p = a2a.NewFileURLPart(a2a.URL(uri), mime)
	}
	p.Filename, p.MediaType = name, mime
	return p
}

// dataURI decodes a base64 data: URI.
func dataURI(uri string) ([]byte, string, bool) {
	rest, ok := strings.CutPrefix(uri, "data:")
	if !ok {
		return nil, "", false
	}
	head, data, ok := strings.Cut(rest, ",")
	mt, isB64 := strings.CutSuffix(head, ";base64")
	if !ok || !isB64 {
		return nil, "", false
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, "", false
	}
	return b, mt, true
}

// blockPart is an ACP content block that is not text: an image or audio
// block's bytes, a resource link's URL, an embedded resource's text or
// blob.
func blockPart(b map[string]any) *a2a.Part {
	mime, _ := b["mimeType"].(string)
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
