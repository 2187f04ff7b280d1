package a2amap

import (
	"encoding/base64"
	"maps"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// ParamParts are the file and data parts of a request's user message as
// the normalizers keep them in its params: params.files ({uri, name,
// mime_type}, bytes as a base64 data: URI) as raw or URL parts,
// params.data_parts ({data, metadata}) as data parts, in that order. The
// task history's user message (userMessage) and the A2A bridge's message
// upstream read them so.
func ParamParts(env *e2a.Envelope) a2a.ContentParts {
	var parts a2a.ContentParts
	for _, f := range Objects(env.Params["files"]) {
		if p := filePart(f); p != nil {
			parts = append(parts, p)
		}
	}
	for _, d := range Objects(env.Params["data_parts"]) {
		if v, ok := d["data"]; ok {
			parts = append(parts, paramDataPart(d, v))
		}
	}
	return parts
}

// partOrder is the params member giving the order of an A2A message's
// parts (normalizer.PartOrder).
const partOrder = "part_order"

// SentParts are the parts of a request's A2A message as sent, in their
// order, each with its metadata, as the normalizers keep them
// (normalizer.PartOrder): by params.part_order, "t" the next text block
// of params.content_blocks (params.text when there is none), "f" the
// next of params.files, "d" the next of params.data_parts; ok is false
// when params has no part_order or its members do not hold the parts it
// names (the message is then params.text, then ParamParts).
func SentParts(env *e2a.Envelope) (parts a2a.ContentParts, ok bool) {
	order, _ := env.Params[partOrder].(string)
	if order == "" {
		return nil, false
	}
	var texts []map[string]any
	if blocks, has := env.Params["content_blocks"]; has {
		for _, b := range Objects(blocks) {
			if b["type"] == "text" {
				texts = append(texts, b)
			}
		}
	} else if s, isText := env.Params["text"].(string); isText {
		texts = []map[string]any{{"text": s}}
	}
	files, data := Objects(env.Params["files"]), Objects(env.Params["data_parts"])
	parts = make(a2a.ContentParts, 0, len(order))
	for i := range len(order) {
		var p *a2a.Part
		switch order[i] {
		case 't':
			if len(texts) > 0 {
				if s, isText := texts[0]["text"].(string); isText {
					meta, _ := texts[0]["_meta"].(map[string]any)
					p = textPart(s, meta)
					// A v1.0 text part's (protocols/a2av1 keepPartFields).
					p.MediaType, _ = texts[0]["mimeType"].(string)
					p.Filename, _ = texts[0]["name"].(string)
				}
				texts = texts[1:]
			}
		case 'f':
			if len(files) > 0 {
				if p = sentFilePart(files[0]); p != nil {
					p.Metadata, _ = files[0]["_meta"].(map[string]any)
				}
				files = files[1:]
			}
		case 'd':
			if len(data) > 0 {
				if v, has := data[0]["data"]; has {
					p = paramDataPart(data[0], v)
				}
				data = data[1:]
			}
		}
		if p == nil {
			return nil, false
		}
		parts = append(parts, p)
	}
	if len(texts)+len(files)+len(data) > 0 {
		return nil, false
	}
	return parts, true
}

// paramDataPart is the data part v of the params.data_parts element d: its
// metadata, and a v1.0 data part's mediaType and filename
// (protocols/a2av1 keepPartFields: mime_type, name, as params.files has
// them).
//
// A v1.0 data part whose value is not an object is the SDK's conversion's
// {"value": v} with metadata data_part_compat (v0.3's data is an object):
// it is v again, without that key, as the SDK reads it back (a2av0.ToV1Part).
func paramDataPart(d map[string]any, v any) *a2a.Part {
	meta, _ := d["metadata"].(map[string]any)
	if compat, _ := meta[dataPartCompat].(bool); compat {
		if obj, ok := v.(map[string]any); ok {
			v = obj["value"]
			meta = maps.Clone(meta)
			delete(meta, dataPartCompat)
			if len(meta) == 0 {
				meta = nil
			}
		}
	}
	p := a2a.NewDataPart(v)
	p.Metadata = meta
	p.MediaType, _ = d["mime_type"].(string)
	p.Filename, _ = d["name"].(string)
	return p
}

// dataPartCompat is the metadata key the SDK's conversion of a v1.0 data
// part to v0.3 marks a value it wrapped in {"value": …} with.
const dataPartCompat = "data_part_compat"

// Objects is v's JSON objects, when v is an array.
func Objects(v any) []map[string]any {
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
// data: URI, else its URL; its media type its mime_type, else the data:
// URI's.
func filePart(f map[string]any) *a2a.Part { return readFilePart(f, true) }

// sentFilePart is filePart of a file an A2A message sent: its media type
// is its mime_type only (the normalizers write a data: URI of bytes sent
// without one as application/octet-stream).
func sentFilePart(f map[string]any) *a2a.Part { return readFilePart(f, false) }

// readFilePart is filePart, the data: URI's media type used when the file
// has no mime_type only when uriType.
func readFilePart(f map[string]any, uriType bool) *a2a.Part {
	uri, _ := f["uri"].(string)
	if uri == "" {
		return nil
	}
	name, _ := f["name"].(string)
	mime, _ := f["mime_type"].(string)
	var p *a2a.Part
	if b, mt, ok := dataURI(uri); ok {
		p = a2a.NewRawPart(b)
		if mime == "" && uriType {
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
