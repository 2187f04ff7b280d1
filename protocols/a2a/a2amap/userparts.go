package a2amap

import (
	"encoding/base64"
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
			p := a2a.NewDataPart(v)
			p.Metadata, _ = d["metadata"].(map[string]any)
			parts = append(parts, p)
		}
	}
	return parts
}

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
