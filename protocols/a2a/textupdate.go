package a2a

import (
	"bytes"
	"strings"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/render"
)

// TextUpdate is the artifact-update event of a plain text chunk, the bulk
// of a streamed answer, as the text fast paths write it straight into
// bytes: A2A v0.3's stream, the A2A v1.0 bindings' (package
// protocols/a2av1) and the events of [Answers.A2AEvents].
type TextUpdate struct {
	ArtifactID        string
	Append            bool
	LLMResponseID     string
	TaskID, ContextID string
	Text              string
}

// ReadTextUpdate reads the plain text chunk of f (render.ReadTextChunk:
// from its bytes when f is not decoded) and does m's bookkeeping for it,
// as m.Events does for that frame. ok is false for any other frame, and
// m is unchanged then; the caller takes its general path.
func ReadTextUpdate(m *a2amap.Mapper, f *render.Frame) (u TextUpdate, ok bool) {
	if labeled(f) {
		return u, false
	}
	c, ok := render.ReadTextChunk(f)
	if !ok {
		return u, false
	}
	id, appendTo, llm := m.TextArtifact(&e2a.Response{ResponseID: c.ResponseID, RequestID: c.RequestID, Sequence: f.Sequence(),
		TaskID: c.TaskID, ContextID: c.ContextID}, c.LLMResponseID)
	return TextUpdate{ArtifactID: string(id), Append: appendTo, LLMResponseID: llm,
		TaskID: m.TaskID(), ContextID: m.ContextID(), Text: c.Text}, true
}

// labeled reports a frame that may label its artifact or its part
// (metadata artifact_name, artifact_description, artifact_metadata,
// artifact_part_metadata, artifact_part_fields, artifact_extensions,
// artifact_event_metadata or artifact_last_chunk: a2amap.MetaArtifactName
// and the others), whose event carries them: the general path writes it.
// Read without decoding, the test is for a key in quotes, which no JSON
// string can hold unescaped (a text holding it has \" before its closing
// quote): one scan for the eight keys' common start, "artifact_, each found checked
// for one of their ends. The scan looks for the start's tail (labelMark:
// its 'f' is rare in a frame, so bytes.Index skips ahead fast; a search
// for the whole start stops at every quote) and checks the head before
// it. A frame that holds such a key elsewhere only takes the general
// path.
func labeled(f *render.Frame) bool {
	if f.Response != nil {
		md := f.Response.Metadata
		return md[a2amap.MetaArtifactName] != nil || md[a2amap.MetaArtifactDescription] != nil ||
			md[a2amap.MetaArtifactMetadata] != nil || md[a2amap.MetaArtifactPartMetadata] != nil ||
			md[a2amap.MetaArtifactPartFields] != nil || md[a2amap.MetaArtifactExtensions] != nil ||
			md[a2amap.MetaArtifactEventMetadata] != nil || md[a2amap.MetaArtifactLastChunk] != nil
	}
	for raw := f.Raw; ; {
		i := bytes.Index(raw, labelMark)
		if i < 0 {
			return false
		}
		head := raw[:i]
		raw = raw[i+len(labelMark):]
		if !bytes.HasSuffix(head, labelHead) {
			continue
		}
		for _, end := range labelEnds {
			if bytes.HasPrefix(raw, end) {
				return true
			}
		}
	}
}

// labelPrefix starts every key labeled looks for; labelHead and
// labelMark are its quoted form ("artifact_) split where the scan looks
// (labelMark, "fact_"), and labelEnds the keys' ends, with their closing
// quote.
const labelPrefix = "artifact_"

var (
	labelHead = []byte(`"` + labelPrefix[:len(labelPrefix)-5])
	labelMark = []byte(labelPrefix[len(labelPrefix)-5:])
	labelEnds = func() [][]byte {
		var ends [][]byte
		for _, k := range []string{a2amap.MetaArtifactName, a2amap.MetaArtifactDescription,
			a2amap.MetaArtifactMetadata, a2amap.MetaArtifactPartMetadata, a2amap.MetaArtifactPartFields,
			a2amap.MetaArtifactExtensions, a2amap.MetaArtifactEventMetadata, a2amap.MetaArtifactLastChunk} {
			if !strings.HasPrefix(k, labelPrefix) {
				panic("a2a: label key " + k + " does not start with " + labelPrefix)
			}
			ends = append(ends, []byte(k[len(labelPrefix):]+`"`))
		}
		return ends
	}()
)

// Len is the length of u's strings, for sizing the buffer an event is
// written into (escapes may need more).
func (u TextUpdate) Len() int {
	return len(u.ArtifactID) + len(u.LLMResponseID) + len(u.TaskID) + len(u.ContextID) + len(u.Text)
}

// AppendMembers appends the members of u's event after its opening brace
// and the generation's discriminator, through the brace that closes the
// event: exactly what json.Marshal writes for the
// TaskArtifactUpdateEvent a2amap.Mapper.Events builds for the chunk, in
// A2A v1.0 when v1 (a text part without kind) or, converted to v0.3
// (a2amap.V03Event), with the text part's kind.
func (u TextUpdate) AppendMembers(b []byte, v1 bool) []byte {
	if u.Append {
		b = append(b, `"append":true,`...)
	}
	b = append(b, `"artifact":{"artifactId":`...)
	b = jsonstr.Append(b, u.ArtifactID)
	if v1 {
		b = append(b, `,"parts":[{"text":`...)
	} else {
		b = append(b, `,"parts":[{"kind":"text","text":`...)
	}
	b = jsonstr.Append(b, u.Text)
	b = append(b, `}]},"contextId":`...)
	b = jsonstr.Append(b, u.ContextID)
	b = append(b, `,"taskId":`...)
	b = jsonstr.Append(b, u.TaskID)
	b = append(b, `,"metadata":{"llm_response_id":`...)
	b = jsonstr.Append(b, u.LLMResponseID)
	b = append(b, `,"object_type":"chat.completion.chunk","tag":""}}`...)
	return b
}

// readTextUpdate is ReadTextUpdate when the fast path is on.
func readTextUpdate(m *a2amap.Mapper, f *render.Frame) (TextUpdate, bool) {
	if !fastText {
		return TextUpdate{}, false
	}
	return ReadTextUpdate(m, f)
}
