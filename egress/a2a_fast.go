package egress

import (
	"bytes"
	"encoding/json"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
)

// fastText enables textEvent; the differential test turns it off to get
// the reference bytes.
var fastText = true

// textEvent renders the event of a plain text chunk, the bulk of a
// streamed answer, straight into the JSON-RPC response bytes: exactly the
// bytes json.Marshal gives for the TaskArtifactUpdateEvent that
// a2aMapper.events builds for it (TestA2AFastTextMatches), without
// building the event, its maps or the reflection encode. ok is false for
// any other frame, which takes the general path; nothing is changed then.
func (r *a2aStream) textEvent(resp *e2a.Response) (out []byte, ok bool) {
	if !fastText || resp.ResponseKind != e2a.KindChunk || resp.IsFinal {
		return nil, false
	}
	var body struct {
		DeltaKind string          `json:"delta_kind"`
		Delta     json.RawMessage `json:"delta"`
	}
	if json.Unmarshal(resp.Body, &body) != nil || body.DeltaKind != e2a.DeltaText ||
		len(body.Delta) == 0 || body.Delta[0] != '"' {
		return nil, false
	}
	var text string
	if json.Unmarshal(body.Delta, &text) != nil {
		return nil, false
	}
	m := r.m
	m.bind(resp)
	p := piece{objectType: ObjectChatCompletionChunk, group: "content"}
	id := m.pieceArtifactID(resp, p)
	llm := llmID(resp)
	if llm == "" {
		llm = string(id)
	}
	appendTo := m.seen[id] || m.resumed
	m.seen[id], m.last, m.content = true, id, true

	if r.rpcID == nil {
		r.rpcID = encodedRPCID(r.p.JSONRPCID)
	}
	b := make([]byte, 0, 256+len(text)+len(id)+len(llm)+len(m.taskID)+len(m.contextID))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, r.rpcID...)
	b = append(b, `,"result":{"kind":"artifact-update",`...)
	if appendTo {
		b = append(b, `"append":true,`...)
	}
	b = append(b, `"artifact":{"artifactId":`...)
	b = jsonstr.Append(b, string(id))
	b = append(b, `,"parts":[{"kind":"text","text":`...)
	b = jsonstr.Append(b, text)
	b = append(b, `}]},"contextId":`...)
	b = jsonstr.Append(b, m.contextID)
	b = append(b, `,"taskId":`...)
	b = jsonstr.Append(b, string(m.taskID))
	b = append(b, `,"metadata":{"llm_response_id":`...)
	b = jsonstr.Append(b, llm)
	b = append(b, `,"object_type":"chat.completion.chunk","tag":""}}}`...)
	return b, true
}

// encodedRPCID is a JSON-RPC id as json.Marshal writes a RawMessage
// (compacted, HTML-escaped), null when absent.
func encodedRPCID(id json.RawMessage) []byte {
	if len(id) == 0 {
		return []byte("null")
	}
	var buf bytes.Buffer
	if json.Compact(&buf, id) != nil {
		return []byte("null")
	}
	out, err := json.Marshal(json.RawMessage(buf.Bytes()))
	if err != nil {
		return []byte("null")
	}
	return out
}
