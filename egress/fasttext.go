package egress

import (
	"bytes"
	"encoding/json"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
)

// fastText enables textEvent; the differential test turns it off to get
// the reference bytes.
var fastText = true

// textFrame is what textEvent reads of a frame: the fields of
// e2a.Response it needs, under the same names, so that encoding/json reads
// the same values from the same bytes.
type textFrame struct {
	ResponseID   string                     `json:"response_id"`
	RequestID    string                     `json:"request_id"`
	IsFinal      bool                       `json:"is_final"`
	ResponseKind string                     `json:"response_kind"`
	TaskID       string                     `json:"task_id"`
	ContextID    string                     `json:"context_id"`
	SessionID    string                     `json:"session_id"`
	Metadata     map[string]json.RawMessage `json:"metadata"`
	Body         struct {
		DeltaKind string          `json:"delta_kind"`
		Delta     json.RawMessage `json:"delta"`
	} `json:"body"`
}

// passThrough: the A2A stream reads whole frames only where textEvent
// does not apply (Frame decodes them then).
func (*a2aStream) passThrough() bool { return fastText }

// textEvent renders the event of a plain text chunk, the bulk of a
// streamed answer, straight from the frame's bytes into the JSON-RPC
// response bytes: exactly the bytes json.Marshal gives for the
// TaskArtifactUpdateEvent that a2aMapper.events builds for it
// (TestA2AFastTextMatches), with one partial decode of the frame and
// without the event, its maps or the reflection encode. ok is false for
// any other frame, which takes the general path; nothing is changed then.
// As for the E2A renderers, which pass frames through reading only their
// head, a text chunk whose other members (timestamp, provenance…) have the
// wrong JSON type is rendered rather than refused as an invalid frame.
func (r *a2aStream) textEvent(f *Frame) (out []byte, ok bool) {
	tf, text, ok := readTextChunk(f)
	if !ok {
		return nil, false
	}
	llm := ""
	if f.Response != nil {
		llm = llmID(f.Response)
	} else if raw, ok := tf.Metadata[MetaLLMResponseID]; ok && len(raw) > 0 && raw[0] == '"' {
		if json.Unmarshal(raw, &llm) != nil {
			return nil, false
		}
	}
	// The mapper's bookkeeping, as events does it for this frame.
	m := r.m
	m.bind(&e2a.Response{RequestID: tf.RequestID, TaskID: tf.TaskID, ContextID: tf.ContextID})
	var id a2a.ArtifactID
	if llm != "" {
		id = a2a.ArtifactID(llm)
	} else {
		id = m.pieceArtifactID(&e2a.Response{ResponseID: tf.ResponseID, RequestID: tf.RequestID},
			piece{objectType: ObjectChatCompletionChunk, group: "content"})
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

// readTextChunk reads a non-final e2a.chunk frame whose delta is text and
// a JSON string: from the decoded frame when the reader decoded it, else
// with one partial decode of its bytes. ok is false for any other frame.
func readTextChunk(f *Frame) (tf textFrame, text string, ok bool) {
	if !fastText || (f.Response == nil && (f.rkind != e2a.KindChunk || f.final)) {
		return tf, "", false
	}
	if f.Response != nil {
		resp := f.Response
		tf.ResponseID, tf.RequestID, tf.IsFinal, tf.ResponseKind = resp.ResponseID, resp.RequestID, resp.IsFinal, resp.ResponseKind
		tf.TaskID, tf.ContextID, tf.SessionID = resp.TaskID, resp.ContextID, resp.SessionID
		if resp.ResponseKind != e2a.KindChunk || resp.IsFinal || json.Unmarshal(resp.Body, &tf.Body) != nil {
			return tf, "", false
		}
	} else if json.Unmarshal(f.Raw, &tf) != nil {
		return tf, "", false
	}
	if tf.ResponseKind != e2a.KindChunk || tf.IsFinal || tf.Body.DeltaKind != e2a.DeltaText ||
		len(tf.Body.Delta) == 0 || tf.Body.Delta[0] != '"' {
		return tf, "", false
	}
	if json.Unmarshal(tf.Body.Delta, &text) != nil {
		return tf, "", false
	}
	return tf, text, true
}

// passThrough: the ACP renderer reads whole frames only where textUpdate
// does not apply (Frame decodes them then).
func (*acpRenderer) passThrough() bool { return fastText }

// textUpdate renders the session/update of a plain text chunk
// (agent_message_chunk) straight into its bytes, as json.Marshal writes
// the notification the general path builds (TestACPFastTextMatches).
func (r *acpRenderer) textUpdate(f *Frame) ([]byte, bool) {
	tf, text, ok := readTextChunk(f)
	if !ok {
		return nil, false
	}
	if r.p.SessionID == "" {
		r.p.SessionID = tf.SessionID
	}
	b := make([]byte, 0, 160+len(text)+len(r.p.SessionID))
	b = append(b, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":`...)
	b = jsonstr.Append(b, r.p.SessionID)
	b = append(b, `,"update":{"content":{"text":`...)
	b = jsonstr.Append(b, text)
	b = append(b, `,"type":"text"},"sessionUpdate":"agent_message_chunk"}}}`...)
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
