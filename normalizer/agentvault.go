package normalizer

import (
	"github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// AgentVault A2A profile methods.
const (
	AVTasksSend          = "tasks/send"
	AVTasksGet           = "tasks/get"
	AVTasksCancel        = "tasks/cancel"
	AVTasksSendSubscribe = "tasks/sendSubscribe"
)

// AVMetaMCPContext is the message metadata key of the MCP context.
const AVMetaMCPContext = "mcp_context"

type avMessageWire struct {
	Role     string         `json:"role"`
	Parts    []any          `json:"parts"`
	Metadata map[string]any `json:"metadata"`
}

type avParamsWire struct {
	ID         *string        `json:"id"`
	Message    *avMessageWire `json:"message"`
	WebhookURL string         `json:"webhookUrl"`
}

// FromAgentVault normalizes a request of the AgentVault A2A profile
// (a2a-agentvault-profile.md). Method is the profile's method; the kind of
// request is in provenance.details (op, task_created / task_continued).
//
//   - tasks/send (OpSubmit): without id a new task (task_id assigned,
//     details task_created), with id a continued one (details
//     task_continued). Parts {type, content}: text → params.text (and
//     content_blocks when more than one plain text part), file (url or
//     uri, media_type/mediaType, filename/name) → params.files as
//     E2AFileRef, data (content object) → params.data_parts, and the
//     order of the parts in those as A2A's (params.part_order). Message
//     metadata → a2a_metadata, and its mcp_context also → params.mcp_context;
//     user_id in it is a claimed user. webhookUrl → provenance.details
//     webhook_url, its scheme and host only (redact.URL). role "assistant"
//     → params.role (the profile's roles are "user" and "assistant").
//   - tasks/sendSubscribe: with a message, as tasks/send but streamed
//     (is_stream, OpSubmit); with only an id, OpSubscribe to that task.
//   - tasks/get (OpQuery) and tasks/cancel (OpCancel): task_id ← id.
//
// Authentication headers (X-Api-Key, Authorization) are never copied.
//
// Errors: ErrParse, ErrInvalidRequest, ErrMethodNotFound, ErrInvalidParams
// (no message or id, no parts, a part without content, a role other than
// "user" or "assistant").
func (n *Normalizer) FromAgentVault(in Input) (*Result, error) {
	r, rq, err := n.beginRPC(in, e2a.SourceAgentVault, ProtocolAgentVault)
	if err != nil {
		return nil, err
	}
	switch rq.Method {
	case AVTasksSend, AVTasksSendSubscribe, AVTasksGet, AVTasksCancel:
	default:
		return nil, rq.errf(ErrMethodNotFound, ProtocolAgentVault, "not an AgentVault A2A method")
	}
	var p avParamsWire
	if err := rq.decodeParams(ProtocolAgentVault, &p); err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) (*Result, error) {
		return nil, rq.errf(ErrInvalidParams, ProtocolAgentVault, format, a...)
	}
	taskID := ""
	if p.ID != nil {
		taskID = *p.ID
	}
	env := r.newEnvelope(rq.Method)
	rq.setJSONRPC(env)
	d := env.Provenance.Details

	if rq.Method != AVTasksSend && !(rq.Method == AVTasksSendSubscribe && p.Message != nil) {
		if taskID == "" {
			return bad("id is required")
		}
		env.TaskID = taskID
		return r.finishTask(env, rq)
	}

	m := p.Message
	if m == nil {
		return bad("message is required")
	}
	switch m.Role {
	case "user", "assistant": // the profile's two roles; never "system"
	default:
		return bad(`message.role must be "user" or "assistant"`)
	}
	if len(m.Parts) == 0 {
		return bad("message.parts must not be empty")
	}
	parts := make(a2a.ContentParts, 0, len(m.Parts))
	for i, raw := range m.Parts {
		part, msg := decodeAVPart(raw)
		if msg != "" {
			return bad("message.parts[%d]: %s", i, msg)
		}
		parts = append(parts, part)
	}
	env.IsStream = rq.Method == AVTasksSendSubscribe
	if taskID == "" {
		d[DetailTaskCreated] = true // named by finish: its request id
	} else {
		env.TaskID = taskID
		d[DetailTaskContinued] = true
	}
	env.Params = a2aPartsToParams(parts)
	if m.Role != "user" {
		env.Params["role"] = m.Role
	}
	var claimed []string
	if len(m.Metadata) > 0 {
		env.A2AMetadata = m.Metadata
		if mc, ok := m.Metadata[AVMetaMCPContext]; ok && mc != nil {
			env.Params[AVMetaMCPContext] = e2a.CloneValue(mc)
		}
		if u := str(m.Metadata, A2AMetaUserID); u != "" {
			claimed = append(claimed, u)
		}
	}
	if p.WebhookURL != "" {
		if u, _ := webhookURL(p.WebhookURL); u != "" {
			d[DetailWebhookURL] = u
		}
	}
	return r.finish(env, OpSubmit, !rq.HasID, claimed...)
}

// decodeAVPart reads a decoded AgentVault part ({type, content} …) into an
// a2a type; the message is empty on success.
func decodeAVPart(raw any) (a2a.Part, string) {
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, "must be an object"
	}
	var meta map[string]any
	if v, ok := m["metadata"]; ok && v != nil {
		if meta, ok = v.(map[string]any); !ok {
			return nil, "metadata must be an object"
		}
	}
	first := func(keys ...string) string {
		for _, k := range keys {
			if s := str(m, k); s != "" {
				return s
			}
		}
		return ""
	}
	switch str(m, "type") {
	case "text":
		t, ok := m["content"].(string)
		if !ok {
			if t, ok = m["text"].(string); !ok {
				return nil, "a text part needs a string content"
			}
		}
		return a2a.TextPart{Text: t, Metadata: meta}, ""
	case "data":
		c, ok := m["content"].(map[string]any)
		if !ok {
			if c, ok = m["data"].(map[string]any); !ok {
				return nil, "a data part needs an object content"
			}
		}
		return a2a.DataPart{Data: c, Metadata: meta}, ""
	case "file":
		fm := a2a.FileMeta{MimeType: first("media_type", "mediaType", "mime_type", "mimeType"), Name: first("filename", "name")}
		if u := first("url", "uri"); u != "" {
			return a2a.FilePart{File: a2a.FileURI{FileMeta: fm, URI: u}, Metadata: meta}, ""
		}
		if b := first("content", "bytes"); b != "" {
			if !validBase64(b) {
				return nil, "a file part's content must be base64 (RFC 4648, padded)"
			}
			return a2a.FilePart{File: a2a.FileBytes{FileMeta: fm, Bytes: b}, Metadata: meta}, ""
		}
		return nil, "a file part needs url or content"
	case "":
		return nil, "type is required"
	}
	return nil, "unknown part type " + echo(str(m, "type"))
}
