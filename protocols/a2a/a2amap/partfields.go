package a2amap

import (
	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// Members of an element of MetaArtifactPartFields: A2A v1.0's Part
// field names.
const (
	fieldMediaType = "mediaType"
	fieldFilename  = "filename"
)

// PartFields is the MetaArtifactPartFields value of parts: for each, its
// mediaType and filename when it is a text or data part (a file part's
// are in A2A v0.3's file: mimeType, name), {} else; nil when no part has
// one.
func PartFields(parts ...*a2a.Part) []any {
	var out []any
	for i, p := range parts {
		f := map[string]any{}
		if p != nil {
			switch p.Content.(type) {
			case a2a.Text, a2a.Data:
				if p.MediaType != "" {
					f[fieldMediaType] = p.MediaType
				}
				if p.Filename != "" {
					f[fieldFilename] = p.Filename
				}
			}
		}
		if len(f) > 0 && out == nil {
			out = make([]any, i, len(parts))
			for j := range out {
				out[j] = map[string]any{}
			}
		}
		if out != nil {
			out = append(out, f)
		}
	}
	return out
}

// partFieldsOf is the MetaArtifactPartFields of frame r (nil for none).
func partFieldsOf(r *e2a.Response) []any {
	fields, _ := r.Metadata[MetaArtifactPartFields].([]any)
	return fields
}

// setPartFields gives parts[i] the mediaType and filename of fields[i]
// (MetaArtifactPartFields), where it is a text or data part without
// its own.
func setPartFields(parts a2a.ContentParts, fields []any) {
	for i, f := range fields {
		m, _ := f.(map[string]any)
		if i >= len(parts) || parts[i] == nil || len(m) == 0 {
			continue
		}
		p := parts[i]
		switch p.Content.(type) {
		case a2a.Text, a2a.Data:
		default:
			continue
		}
		if s, ok := m[fieldMediaType].(string); ok && p.MediaType == "" {
			p.MediaType = s
		}
		if s, ok := m[fieldFilename].(string); ok && p.Filename == "" {
			p.Filename = s
		}
	}
}

// orFields is fields, or else (none) old: a part's fields as its chunks
// carry them, the last that has some.
func orFields(fields, old []any) []any {
	if len(fields) > 0 {
		return fields
	}
	return old
}
