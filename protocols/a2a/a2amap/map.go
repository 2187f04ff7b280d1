package a2amap

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	legacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
)

// Metadata keys of the trpc A2A interaction spec.
const (
	MetaObjectType    = "object_type"
	MetaTag           = "tag"
	MetaLLMResponseID = "llm_response_id"
	MetaThought       = "thought"
	MetaPartType      = "type"
	// MetaArtifactName and MetaArtifactDescription, in a content
	// frame's metadata, are the name and description of the artifact its
	// chunk is part of (an A2A agent's, through the A2A bridge): its
	// artifact-update carries them, and so does the task's artifact.
	MetaArtifactName        = "artifact_name"
	MetaArtifactDescription = "artifact_description"
	// MetaArtifactMetadata, a JSON object in a content frame's metadata,
	// is metadata of the artifact its chunk is part of: its
	// artifact-update carries it as the artifact's metadata, which a
	// client merges into the artifact's as an appended update's (a2a-go's
	// task manager: maps.Copy), and the task's artifact holds every such
	// frame's merged so. A frame that adds nothing carries none (the A2A
	// bridge: the first chunk of an agent's artifact with metadata, and
	// one whose update changed it).
	MetaArtifactMetadata = "artifact_metadata"
	// MetaArtifactPartMetadata, a JSON object in a text or reasoning
	// chunk's metadata, is the metadata of the text part the chunk
	// renders: its artifact-update's part carries it (beside a
	// reasoning part's thought), and the task's artifact's text part
	// (the text of its chunks joined) every such frame's merged. Unlike
	// MetaArtifactMetadata every chunk of the part carries it (the
	// writer coalesces only chunks of the same metadata).
	MetaArtifactPartMetadata = "artifact_part_metadata"
	// MetaArtifactPartFields, a JSON array in the metadata of a text or
	// reasoning chunk's frame or of an a2a.stream_event artifact_update
	// or status_update frame (its message's parts), holds the A2A v1.0
	// Part fields of the frame's parts that
	// A2A v0.3's text and data parts (the shape of a2a.* bodies, spec
	// §12.5) do not have: element i, an object with mediaType and/or
	// filename, is part i's (a chunk's: its one part's; {} for a part with
	// neither). The renderers give them to the parts of the A2A v1.0
	// events and of the task (A2A v0.3 has nowhere to put them). The A2A
	// bridge writes it for an agent's parts that have them, on every
	// chunk of such a part (chunks of the same fields coalesce), and sets
	// it for each native frame it writes (a frame's metadata holds until
	// set again: an agent that sets it sets it so).
	MetaArtifactPartFields = "artifact_part_fields"
	// MetaArtifactExtensions, a JSON array of strings in a content
	// chunk's frame metadata, is the extensions (URIs) of the artifact the
	// chunk is part of (A2A Artifact.extensions), as MetaArtifactName its
	// name: the A2A bridge writes it on the first chunk of an agent's
	// artifact that has some.
	MetaArtifactExtensions = "artifact_extensions"
	// MetaArtifactEventMetadata, a JSON object in a content chunk's
	// frame metadata, is the metadata of the artifact-update event the
	// chunk renders (A2A TaskArtifactUpdateEvent.metadata: the A2A
	// bridge's agent's, on every chunk of such an update's parts): the
	// stream's event carries its members beside the mapping's own
	// (object_type, tag, llm_response_id win). An event's metadata is no
	// part of the task.
	MetaArtifactEventMetadata = "artifact_event_metadata"
	// MetaStatusEventMetadata, a JSON object in a final e2a.complete or
	// e2a.error frame's metadata, is the metadata of the final
	// status-update the stream ends the task with
	// (TaskStatusUpdateEvent.metadata: the A2A bridge's agent's final
	// status-update's, completed or failed). An agent's own status_update
	// frame carries its own.
	MetaStatusEventMetadata = "status_event_metadata"
	// MetaStatusMessage, a JSON object in a final e2a.error frame's
	// metadata, is the agent's own message of the failed status the
	// stream ends the task with (an A2A v0.3 Message: the A2A bridge's
	// agent's failed status-update's, its parts' mediaType and filename
	// in MetaArtifactPartFields), which the renderers give that status in
	// place of the failure's own (its code and text in metadata.error):
	// what a client of the agent itself sees.
	MetaStatusMessage = "status_message"
	// MetaTaskMetadata, a JSON object in a frame's metadata, is metadata
	// the agent gave its task itself (A2A Task.metadata: the A2A bridge's
	// agent's Task event's, on the next frame written after it), which
	// the task (GetTask, tasks/get, a blocking send's) merges into its
	// metadata where the frame comes, before the frame's own event's; a
	// stream has no event for it (its Task is the pipeline's).
	MetaTaskMetadata = "task_metadata"
	// MetaArtifactLastChunk, true in a content chunk's frame metadata,
	// says the chunk ends its artifact (A2A lastChunk: the A2A bridge's
	// agent's last chunk of it): the stream's artifact-update says so.
	MetaArtifactLastChunk = "artifact_last_chunk"
)

// Object types and tags of the trpc A2A interaction spec.
const (
	ObjectChatCompletion      = "chat.completion"
	ObjectChatCompletionChunk = "chat.completion.chunk"
	ObjectToolResponse        = "tool.response"
	TagCodeExecutionCode      = "code_execution_code"
	TagCodeExecutionResult    = "code_execution_result"
	PartExecutableCode        = "executable_code"
	PartCodeExecutionResult   = "code_execution_result"
)

// piece is the A2A rendering of one content delta: the parts, the metadata
// of the event or message that carries them, and how they group.
type piece struct {
	parts      a2a.ContentParts
	objectType string
	tag        string
	group      string // content, call, response, code, other
	thought    bool
}

func (p piece) meta(llmID string) map[string]any {
	m := map[string]any{MetaObjectType: p.objectType, MetaTag: p.tag}
	if llmID != "" {
		m[MetaLLMResponseID] = llmID
	}
	return m
}

// DeltaText returns a text delta as a string.
func DeltaText(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case nil:
		return ""
	case json.Number:
		return t.String()
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// AsMap returns v as a JSON object, when it is one.
func AsMap(v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	return m, ok
}

// chunkPiece renders an e2a.chunk body (trpc "Event Types and A2A Mapping").
func chunkPiece(c e2a.ChunkBody) (piece, bool) {
	switch c.DeltaKind {
	case e2a.DeltaText:
		return piece{parts: a2a.ContentParts{textPart(DeltaText(c.Delta), nil)}, objectType: ObjectChatCompletionChunk, group: "content"}, true
	case e2a.DeltaReasoning:
		return piece{parts: a2a.ContentParts{textPart(DeltaText(c.Delta), map[string]any{MetaThought: true})},
			objectType: ObjectChatCompletionChunk, group: "content", thought: true}, true
	case e2a.DeltaTool, e2a.DeltaCustom:
		obj, ok := AsMap(c.Delta)
		if !ok {
			data := map[string]any{"value": c.Delta}
			return piece{parts: a2a.ContentParts{dataPart(data, partMeta(c.DeltaKind, c.MimeType))}, objectType: ObjectChatCompletion, group: "other"}, true
		}
		typ, _ := obj["type"].(string)
		switch typ {
		case e2a.ToolFunctionCall:
			data := dropNil(map[string]any{"id": obj["id"], "type": "function", "name": obj["name"], "args": jsonString(obj["args"])})
			return piece{parts: a2a.ContentParts{dataPart(data, map[string]any{MetaPartType: e2a.ToolFunctionCall})},
				objectType: ObjectChatCompletion, group: "call"}, true
		case e2a.ToolFunctionResponse:
			data := dropNil(map[string]any{"id": obj["id"], "name": obj["name"], "response": jsonString(obj["response"])})
			return piece{parts: a2a.ContentParts{dataPart(data, map[string]any{MetaPartType: e2a.ToolFunctionResponse})},
				objectType: ObjectToolResponse, group: "response"}, true
		case PartExecutableCode:
			data := dropNil(map[string]any{"code": obj["code"], "language": obj["language"]})
			return piece{parts: a2a.ContentParts{dataPart(data, map[string]any{MetaPartType: PartExecutableCode})},
				objectType: ObjectChatCompletion, tag: TagCodeExecutionCode, group: "code"}, true
		case PartCodeExecutionResult:
			data := dropNil(map[string]any{"output": obj["output"], "outcome": obj["outcome"]})
			return piece{parts: a2a.ContentParts{dataPart(data, map[string]any{MetaPartType: PartCodeExecutionResult})},
				objectType: ObjectChatCompletion, tag: TagCodeExecutionResult, group: "code"}, true
		}
		t := typ
		if t == "" {
			t = c.DeltaKind
		}
		return piece{parts: a2a.ContentParts{dataPart(obj, partMeta(t, c.MimeType))}, objectType: ObjectChatCompletion, group: "other"}, true
	}
	return piece{}, false
}

func partMeta(typ, mime string) map[string]any {
	m := map[string]any{MetaPartType: typ}
	if mime != "" {
		m["mime_type"] = mime
	}
	return m
}

// resultParts renders the result of an e2a.complete frame: a string or an
// object's content/text string as a text part, any other object as a
// data part.
func resultParts(v any) a2a.ContentParts {
	if s, ok := ResultText(v); ok {
		return a2a.ContentParts{textPart(s, nil)}
	}
	switch t := v.(type) {
	case nil, string:
		return nil
	case map[string]any:
		if len(t) == 0 {
			return nil
		}
		return a2a.ContentParts{dataPart(t, nil)}
	}
	return a2a.ContentParts{dataPart(map[string]any{"result": v}, nil)}
}

// ResultText is the text an e2a.complete result stands for: the result
// when it is a non-empty string, else an object's "content" or "text"
// string. ok is false for any other result (shown as data, or nothing).
func ResultText(v any) (text string, ok bool) {
	switch t := v.(type) {
	case string:
		return t, t != ""
	case map[string]any:
		for _, k := range []string{"content", "text"} {
			if s, ok := t[k].(string); ok {
				return s, true
			}
		}
	}
	return "", false
}

// textPart is a text part with its metadata.
func textPart(text string, meta map[string]any) *a2a.Part {
	return &a2a.Part{Content: a2a.Text(text), Metadata: meta}
}

// dataPart is a data part (a JSON object) with its metadata.
func dataPart(data map[string]any, meta map[string]any) *a2a.Part {
	return &a2a.Part{Content: a2a.Data{Value: data}, Metadata: meta}
}

// thoughtText reports a text part the interaction spec marks as
// reasoning (metadata thought=true), and its text.
func thoughtText(p *a2a.Part) (string, bool) {
	t, ok := p.Content.(a2a.Text)
	return string(t), ok && p.Metadata[MetaThought] == true
}

// acpUpdate extracts the session/update object from an acp.session_update
// body: either the notification params {sessionId, update} or the update
// itself {sessionUpdate, …}.
func ACPUpdate(body map[string]any) map[string]any {
	if u, ok := body["update"].(map[string]any); ok {
		return u
	}
	return body
}

// acpToChunk turns an ACP session update into the equivalent e2a.chunk
// body, so that every renderer maps ACP-shaped frames like native ones.
// ok is false for updates with no content (mode changes, commands).
func acpToChunk(u map[string]any) (e2a.ChunkBody, bool) {
	kind, _ := u["sessionUpdate"].(string)
	switch kind {
	case e2a.UpdateAgentMessageChunk, e2a.UpdateAgentThoughtChunk:
		dk := e2a.DeltaText
		if kind == e2a.UpdateAgentThoughtChunk {
			dk = e2a.DeltaReasoning
		}
		content, _ := u["content"].(map[string]any)
		if t, _ := content["type"].(string); t == "text" || t == "" {
			return e2a.ChunkBody{DeltaKind: dk, Delta: DeltaText(content["text"])}, true
		}
		return e2a.ChunkBody{DeltaKind: e2a.DeltaCustom, Delta: content}, true
	case e2a.UpdateToolCall:
		return e2a.ChunkBody{DeltaKind: e2a.DeltaTool, Delta: map[string]any{
			"type": e2a.ToolFunctionCall, "id": u["toolCallId"], "name": u["title"], "args": u["rawInput"]}}, true
	case e2a.UpdateToolCallUpdate:
		st, _ := u["status"].(string)
		out := u["rawOutput"]
		if out == nil {
			out = u["content"]
		}
		if st != "completed" && st != "failed" && out == nil {
			return e2a.ChunkBody{}, false
		}
		return e2a.ChunkBody{DeltaKind: e2a.DeltaTool, Delta: map[string]any{
			"type": e2a.ToolFunctionResponse, "id": u["toolCallId"], "name": u["title"], "response": out}}, true
	case e2a.UpdatePlan:
		return e2a.ChunkBody{DeltaKind: e2a.DeltaCustom, Delta: map[string]any{"type": "plan", "entries": u["entries"]}}, true
	}
	return e2a.ChunkBody{}, false
}

// ContentChunk returns the chunk a content-bearing frame (e2a.chunk or
// acp.session_update) stands for.
func ContentChunk(r *e2a.Response) (e2a.ChunkBody, bool) {
	switch r.ResponseKind {
	case e2a.KindChunk:
		c, err := r.Chunk()
		return c, err == nil
	case e2a.KindACPSessionUpd:
		body, err := r.BodyMap()
		if err != nil {
			return e2a.ChunkBody{}, false
		}
		return acpToChunk(ACPUpdate(body))
	}
	return e2a.ChunkBody{}, false
}

// Outcome is how a final frame ends a request (and its A2A task), for
// the renderers of every protocol.
type Outcome struct {
	// State is the A2A task state the frame ends in.
	State a2a.TaskState
	// Message, Code, Retryable and Details describe a failure (an
	// e2a.error body, a refusal, an ACP JSON-RPC error).
	Message   string
	Code      string
	Retryable bool
	Details   map[string]any
	// Result is the result of an e2a.complete frame; HasResult reports
	// that there was one.
	Result    any
	HasResult bool
}

// UnreadableFinal is the status message of a task whose final a2a.*
// frame is not the A2A object it names (a2a.stream_event's payload,
// a2a.task's or a2a.message's body): the task ends failed with it, code
// egress.CodeInvalidFrame, so that its streams still end and tasks/get
// shows a terminal state. Such a frame that is not final is skipped
// ([Mapper.Events], [Aggregator.Add]).
const UnreadableFinal = "the agent's final A2A event could not be read"

// unreadableOutcome is the outcome of a final a2a.* frame that does not
// read (UnreadableFinal).
var unreadableOutcome = Outcome{State: a2a.TaskStateFailed, Message: UnreadableFinal, Code: egress.CodeInvalidFrame}

// FinalOutcome reads the outcome of a final frame: e2a.complete,
// e2a.error, an ACP prompt response or JSON-RPC error, an interrupted
// turn (state input-required or auth-required, Message the agent's text:
// e2a.Response.Interrupt), failed with [UnreadableFinal] for an a2a.*
// frame whose body is not the A2A object it names, or the frame's status
// otherwise.
func FinalOutcome(r *e2a.Response) Outcome {
	switch r.ResponseKind {
	case e2a.KindComplete:
		c, _ := r.Complete()
		return Outcome{State: a2a.TaskStateCompleted, Result: c.Result, HasResult: true}
	case e2a.KindError:
		b, _ := r.Error()
		st := a2a.TaskStateFailed
		if b.Code == e2a.ErrCodeCancelled {
			st = a2a.TaskStateCanceled
		}
		return Outcome{State: st, Message: b.Message, Code: b.Code, Retryable: b.Retryable, Details: b.Details}
	case e2a.KindACPPromptRes:
		body, _ := r.BodyMap()
		switch StopReason(body) {
		case e2a.StopCancelled:
			return Outcome{State: a2a.TaskStateCanceled, Message: "cancelled", Code: e2a.ErrCodeCancelled}
		case e2a.StopRefusal:
			return Outcome{State: a2a.TaskStateRejected, Message: "refusal", Code: e2a.StopRefusal}
		}
		return Outcome{State: a2a.TaskStateCompleted}
	case e2a.KindACPJSONRPCErr:
		body, _ := r.BodyMap()
		msg, _ := body["message"].(string)
		return Outcome{State: a2a.TaskStateFailed, Message: msg, Code: fmt.Sprint(body["code"])}
	case e2a.KindA2AStreamEvent:
		// An interrupted turn (agent.Interrupt): the task waits for the
		// client's next message; Message is the agent's text.
		if state, text, ok := r.Interrupt(); ok {
			return Outcome{State: a2av0.ToV1TaskState(legacy.TaskState(state)), Message: text}
		}
		// The agent's own final status-update in a terminal state
		// (rejected, failed, canceled, completed).
		ev, err := NativeEvent(r)
		if err != nil {
			return unreadableOutcome
		}
		if su, ok := ev.(*legacy.TaskStatusUpdateEvent); ok && su.Status.State.Terminal() {
			return Outcome{State: a2av0.ToV1TaskState(su.Status.State), Message: legacyText(su.Status.Message)}
		}
	case e2a.KindA2ATask, e2a.KindA2AMessage:
		ev, err := NativeEvent(r)
		if err != nil {
			return unreadableOutcome
		}
		// The agent's Task in an interrupted state (e2a.Response.Interrupt).
		if state, text, ok := r.Interrupt(); ok {
			return Outcome{State: a2av0.ToV1TaskState(legacy.TaskState(state)), Message: text}
		}
		// The agent's own Task in a terminal state, as its final
		// status-update above.
		if t, ok := ev.(*legacy.Task); ok && t.Status.State.Terminal() {
			return Outcome{State: a2av0.ToV1TaskState(t.Status.State), Message: legacyText(t.Status.Message)}
		}
	}
	if r.Status == e2a.StatusFailed {
		return Outcome{State: a2a.TaskStateFailed, Message: "failed"}
	}
	return Outcome{State: a2a.TaskStateCompleted}
}

func StopReason(body map[string]any) string {
	for _, k := range []string{"stopReason", "stop_reason"} {
		if s, ok := body[k].(string); ok {
			return s
		}
	}
	return e2a.StopEndTurn
}

// FrameTime returns the time a frame carries, in UTC; nil when it has
// none that parses.
func FrameTime(r *e2a.Response) *time.Time {
	t, err := e2a.ParseTime(r.Timestamp)
	if err != nil {
		return nil
	}
	t = t.UTC()
	return &t
}

// artifactLabel is the artifact name, description and metadata a content
// frame's metadata gives (MetaArtifactName, MetaArtifactDescription,
// MetaArtifactMetadata: an object, else none).
func artifactLabel(r *e2a.Response) label {
	if r.Metadata == nil {
		return label{}
	}
	var l label
	l.name, _ = r.Metadata[MetaArtifactName].(string)
	l.description, _ = r.Metadata[MetaArtifactDescription].(string)
	if md, ok := r.Metadata[MetaArtifactMetadata].(map[string]any); ok && len(md) > 0 {
		l.meta = md
	}
	if ext, ok := r.Metadata[MetaArtifactExtensions].([]any); ok {
		for _, x := range ext {
			if s, ok := x.(string); ok && s != "" {
				l.extensions = append(l.extensions, s)
			}
		}
	}
	return l
}

// partMetadata is the metadata of a text or reasoning chunk's part its
// frame's metadata gives (MetaArtifactPartMetadata: an object, else nil).
func partMetadata(r *e2a.Response) map[string]any {
	md, _ := r.Metadata[MetaArtifactPartMetadata].(map[string]any)
	if len(md) == 0 {
		return nil
	}
	return md
}

// withPartMeta is the metadata of a content part whose own is own (a
// reasoning part's thought=true, else nil) and whose frame gave extra
// (partMetadata): extra's members, then own's over them (a part stays
// what the chunk's kind says: mergeMeta). own when extra is empty.
func withPartMeta(own, extra map[string]any) map[string]any {
	if len(extra) == 0 {
		return own
	}
	return mergeMeta(extra, own)
}

// mergeMeta is the metadata md with more merged in, as an appended
// artifact-update's metadata merges into the artifact's (a2a-go's task
// manager: maps.Copy, more's members over md's), in a new map (md may be
// an artifact's that others share); md itself when more is empty.
func mergeMeta(md, more map[string]any) map[string]any {
	if len(more) == 0 {
		return md
	}
	out := make(map[string]any, len(md)+len(more))
	maps.Copy(out, md)
	maps.Copy(out, more)
	return out
}

func LLMResponseID(r *e2a.Response) string {
	if r.Metadata == nil {
		return ""
	}
	s, _ := r.Metadata[MetaLLMResponseID].(string)
	return s
}

// a2aStructural maps the snake_case keys of proto-aligned A2A JSON (spec
// §12.5: a2a.task / a2a.message bodies "aligned with spec/a2a.proto") to
// the camelCase of the JSON-RPC binding.
var a2aStructural = map[string]string{
	"context_id": "contextId", "task_id": "taskId", "message_id": "messageId",
	"artifact_id": "artifactId", "last_chunk": "lastChunk", "reference_task_ids": "referenceTaskIds",
	"mime_type": "mimeType", "media_type": "mimeType", "file_with_uri": "uri", "file_with_bytes": "bytes",
}

// normalizeA2A rewrites proto-style A2A JSON (snake_case keys, ROLE_AGENT,
// TASK_STATE_COMPLETED, parts without kind) into the JSON-RPC binding's
// shape. The contents of data and metadata members are left alone.
func normalizeA2A(v any) any {
	switch t := v.(type) {
	case []any:
		for i := range t {
			t[i] = normalizeA2A(t[i])
		}
		return t
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			if nk, ok := a2aStructural[k]; ok {
				k = nk
			}
			switch k {
			case "metadata":
				out[k] = val
				continue
			case "data":
				// A part's data is user content, left alone; a proto
				// DataPart (no kind) wraps it once more as {"data": {...}}.
				if _, hasKind := t["kind"]; !hasKind {
					if inner, ok := val.(map[string]any); ok && len(inner) == 1 {
						if d, ok := inner["data"].(map[string]any); ok {
							val = d
						}
					}
				}
				out[k] = val
				continue
			case "role":
				if s, ok := val.(string); ok {
					val = strings.ToLower(strings.TrimPrefix(s, "ROLE_"))
				}
			case "state":
				if s, ok := val.(string); ok && strings.HasPrefix(s, "TASK_STATE_") {
					val = strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s, "TASK_STATE_")), "_", "-")
				}
			}
			out[k] = normalizeA2A(val)
		}
		if _, ok := out["parts"]; ok {
			if parts, ok := out["parts"].([]any); ok {
				for _, p := range parts {
					if pm, ok := p.(map[string]any); ok {
						if _, has := pm["kind"]; !has {
							switch {
							case pm["text"] != nil:
								pm["kind"] = "text"
							case pm["file"] != nil:
								pm["kind"] = "file"
							case pm["data"] != nil:
								pm["kind"] = "data"
							}
						}
					}
				}
			}
		}
		return out
	}
	return v
}

// branchKinds are the A2A event kinds of the branches of an
// a2a.stream_event frame.
var branchKinds = map[string]string{
	e2a.BranchTask: "task", e2a.BranchMessage: "message",
	e2a.BranchStatusUpdate: "status-update", e2a.BranchArtifactUpdate: "artifact-update",
	"status-update": "status-update", "artifact-update": "artifact-update",
}

// decodeA2AEvent decodes an A2A object of the given kind (task, message,
// status-update, artifact-update) from a frame body.
func decodeA2AEvent(kind string, v any) (legacy.Event, error) {
	n := normalizeA2A(e2a.PlainJSON(v))
	m, ok := n.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: A2A %s is not an object", ErrInvalidFrame, kind)
	}
	if _, has := m["kind"]; !has {
		m["kind"] = kind
	}
	b, _ := json.Marshal(m)
	ev, err := legacy.UnmarshalEventJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%w: A2A %s: %v", ErrInvalidFrame, kind, err)
	}
	return ev, nil
}

// KnownBranch reports whether branch is a branch of an a2a.stream_event
// frame (task, message, status_update, artifact_update).
func KnownBranch(branch string) bool {
	_, ok := branchKinds[branch]
	return ok
}

// Replied reports whether r is the final frame of a turn the agent
// answered with a Message (e2a.Response.Reply) the A2A renderers read:
// such a stream is the Message alone, with no Task first. An unreadable
// one is no answer: it ends the task failed (UnreadableFinal), and its
// stream opens with the Task as any task's does.
func Replied(r *e2a.Response) bool {
	if _, ok := r.Reply(); !ok {
		return false
	}
	_, _, err := nativeV1(r)
	return err == nil
}

// NativeEvent returns the A2A event carried by an a2a.* frame (nil for
// any other frame) as the frame's body has it: A2A v0.3's JSON-RPC shape,
// proto-style JSON read into it (snake_case keys, enums, parts without
// kind). The mapping reads it in v1.0 ([Mapper.Events]).
func NativeEvent(r *e2a.Response) (legacy.Event, error) {
	switch r.ResponseKind {
	case e2a.KindA2AStreamEvent:
		b, err := r.StreamEvent()
		if err != nil {
			return nil, err
		}
		return decodeA2AEvent(branchKinds[b.Branch], b.Payload)
	case e2a.KindA2ATask, e2a.KindA2AMessage:
		body, err := r.BodyMap()
		if err != nil {
			return nil, err
		}
		kind := "task"
		if r.ResponseKind == e2a.KindA2AMessage {
			kind = "message"
		}
		return decodeA2AEvent(kind, body)
	}
	return nil, nil
}

// nativeV1 is the event of an a2a.* frame (NativeEvent) in A2A v1.0, the
// SDK's conversion, and whether a status-update said it is final (v0.3's
// flag, which v1.0 has not). ev is nil for any other frame.
func nativeV1(r *e2a.Response) (ev a2a.Event, final bool, err error) {
	old, err := NativeEvent(r)
	if err != nil || old == nil {
		return nil, false, err
	}
	if su, ok := old.(*legacy.TaskStatusUpdateEvent); ok {
		final = su.Final
	}
	ev, err = a2av0.ToV1Event(old)
	if err != nil {
		return nil, false, fmt.Errorf("%w: A2A event: %v", ErrInvalidFrame, err)
	}
	switch e := ev.(type) {
	case *a2a.TaskArtifactUpdateEvent:
		if e.Artifact != nil {
			setPartFields(e.Artifact.Parts, partFieldsOf(r))
		}
	case *a2a.TaskStatusUpdateEvent:
		if e.Status.Message != nil {
			setPartFields(e.Status.Message.Parts, partFieldsOf(r))
		}
	case *a2a.Message:
		setPartFields(e.Parts, partFieldsOf(r))
	}
	return ev, final, nil
}

// Interrupted reports whether s is the state of an interrupted turn
// (input-required, auth-required): the task is not terminal, its next
// message continues it.
func Interrupted(s a2a.TaskState) bool {
	return s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

// ownIDs gives an agent's own status or artifact event the ids of the
// mapper's task and context where it names none (agent.Interrupt's
// status-update knows neither), the status a final frame carries the
// frame's time when it has none, and its status message an id, a role
// and those ids too: clients key messages by them.
func (m *Mapper) ownIDs(ev a2a.Event, r *e2a.Response) {
	switch e := ev.(type) {
	case *a2a.TaskStatusUpdateEvent:
		if e.TaskID == "" {
			e.TaskID = m.taskID
		}
		if e.ContextID == "" {
			e.ContextID = m.contextID
		}
		if e.Status.Timestamp == nil && r.IsFinal {
			e.Status.Timestamp = FrameTime(r)
		}
		m.ownMessage(e.Status.Message, r)
	case *a2a.TaskArtifactUpdateEvent:
		if e.TaskID == "" {
			e.TaskID = m.taskID
		}
		if e.ContextID == "" {
			e.ContextID = m.contextID
		}
	case *a2a.Message:
		// The agent's direct answer (agent.Reply): an id, a role and the
		// context, but no task (the answer makes none).
		taskID := e.TaskID
		m.ownMessage(e, r)
		e.TaskID = taskID
	}
}

// ownMessage fills an agent status message's missing id (the frame's
// response_id, else its request_id), role, task and context.
func (m *Mapper) ownMessage(msg *a2a.Message, r *e2a.Response) {
	if msg == nil {
		return
	}
	if msg.ID == "" {
		msg.ID = r.ResponseID
		if msg.ID == "" {
			msg.ID = r.RequestID
		}
	}
	if msg.Role == a2a.MessageRoleUnspecified {
		msg.Role = a2a.MessageRoleAgent
	}
	if msg.TaskID == "" {
		msg.TaskID = m.taskID
	}
	if msg.ContextID == "" {
		msg.ContextID = m.contextID
	}
}

// closing reports whether ev, an event of the frame being mapped, ends
// the stream by itself: a final status-update (Final), a task in a
// terminal state, a message.
func (m *Mapper) closing(ev a2a.Event) bool {
	switch e := ev.(type) {
	case *a2a.TaskStatusUpdateEvent:
		return m.Final(e)
	case *a2a.Task:
		return e.Status.State.Terminal()
	case *a2a.Message:
		return true
	}
	return false
}

// Mapper maps the frames of one request, in order, to the A2A v1.0
// events a stream carries for them (SendStreamingMessage and
// SubscribeToTask of the v1.0 bindings, written as they are; A2A v0.3's
// message/stream and tasks/resubscribe and the AgentVault profile,
// converted at their edge: V03Event).
type Mapper struct {
	taskID    a2a.TaskID
	contextID string
	requestID string
	// resumed: the stream resumes at sequence from, after frames the
	// client has, so that an artifact the mapper has not seen may be one
	// the client has: its updates append. Once the mapper was given every
	// frame before from, in order (primed: the frames a render.Primer
	// gets, up to next), it knows which artifacts the client has (seen),
	// and resumed is cleared: an artifact that starts after the resume
	// point starts without append, as in the stream the client resumes.
	resumed    bool
	from, next int64
	seen       map[a2a.ArtifactID]bool
	// hidden, in a stream's mapper, is what its client does not get
	// (HiddenPart): an artifact counts as seen (its next update appends)
	// once the client got a part of it. An OpenAI model's reasoning opens
	// its artifact, and a client without the interaction extension was
	// sent its first content update with append true, for an artifact it
	// never saw (a2a-go's task manager stops there).
	hidden  func(*a2a.Part) bool
	content bool
	// runKey and runID: without llm_response_id, consecutive text (or
	// reasoning) chunks share one artifact; every other event has its own.
	runKey string
	runID  a2a.ArtifactID
	// finals are the status-updates of the last Events call that end the
	// stream (v0.3's final flag: Final).
	finals []*a2a.TaskStatusUpdateEvent
	// warned: an unreadable frame was logged (skipped), shared by the
	// mappers of one read (BuildTask's requests).
	warned *bool
	// taskStream: the stream follows a task (Params.Continued,
	// Params.Resubscribe, a resumed stream, or one that has mapped a frame
	// already: its Task went out first), so the agent's direct answer
	// (agent.Reply) is the task's final status-update carrying that
	// message (replyUpdate), never a bare Message.
	taskStream bool
}

// newMapper returns the mapper of the call p from sequence from (from >
// 0: a resumed stream, whose artifacts are appended to); the task and
// context ids default to the frames'.
func newMapper(p Params, from int64) *Mapper {
	return &Mapper{taskID: a2a.TaskID(p.TaskID), contextID: p.ContextID, resumed: from > 0, from: from, seen: map[a2a.ArtifactID]bool{}, warned: new(bool),
		taskStream: p.Continued || p.Resubscribe || from > 0}
}

// Replied is [Replied] for this mapper's stream: false when the stream
// follows a task (a continued task's, a resubscription, a resumed
// stream, a stream past its first frame), whose agent's direct answer is a
// status-update of the task (Events), so the stream opens with the Task
// all the same.
func (m *Mapper) Replied(r *e2a.Response) bool {
	return !m.taskStream && Replied(r)
}

// replyUpdate is the event of the agent's direct answer msg (final frame
// r) in the stream of a task: the task's final status-update in the
// turn's outcome (completed; failed for a failed frame, as BuildTask reads
// it), carrying the message (with the task's id, as tasks/get shows the
// reply in the task's history).
func (m *Mapper) replyUpdate(msg *a2a.Message, r *e2a.Response) *a2a.TaskStatusUpdateEvent {
	msg.TaskID = m.taskID
	return m.finalUpdate(FinalOutcome(r).State, FrameTime(r), msg)
}

// unreadable logs, once per read (at Warn, with the request id and the
// frame's sequence), that the a2a.* frame r is not the A2A object it
// names (err): a reader skips it, or ends the task failed when it is
// final (UnreadableFinal), and never fails the read for it. The agent
// runtime checks only a frame's branch, and raw publishers write frames
// as they like: one such frame must not break every read of its request.
func (m *Mapper) unreadable(r *e2a.Response, err error) {
	if *m.warned {
		return
	}
	*m.warned = true
	what := "skipped"
	if r.IsFinal {
		what = "the task ends failed"
	}
	slog.Default().Warn("a2a: unreadable A2A frame: "+what, "request_id", r.RequestID, "sequence", r.Sequence,
		"response_kind", r.ResponseKind, "final", r.IsFinal, "err", err)
}

// NewStreamMapper is the mapper of a stream of requestID's events: unless
// the stream resumes (p.Resubscribe, from > 0) its submitted
// status-update goes out before any frame, so its ids are fixed now (the
// task's, else requestID).
func NewStreamMapper(requestID string, p Params, from int64) *Mapper {
	m := newMapper(p, from)
	m.requestID = requestID
	m.hidden = HiddenPart(p)
	if !p.Resubscribe && from == 0 {
		if m.taskID == "" {
			m.taskID = a2a.TaskID(requestID)
		}
		if m.contextID == "" {
			m.contextID = string(m.taskID)
		}
	}
	return m
}

// NewTaskMapper returns the mapper of a stream of task taskID ("" names
// the task requestID): the agent's direct answer ends it as the task's
// final status-update (Mapper.Replied).
func NewTaskMapper(taskID, requestID string) *Mapper {
	m := newMapper(Params{TaskID: taskID}, 0)
	m.taskStream = true
	if m.taskID == "" {
		m.taskID = a2a.TaskID(requestID)
	}
	return m
}

// TaskID is the id of the mapper's task (once a frame or a constructor
// fixed it).
func (m *Mapper) TaskID() string { return string(m.taskID) }

// ContextID is the id of the mapper's context (once a frame or a
// constructor fixed it).
func (m *Mapper) ContextID() string { return m.contextID }

// Final reports whether ev, a status-update of the last [Mapper.Events]
// call, ends the stream: the one a final frame ends with, or an agent's
// own that said so. It is A2A v0.3's final flag (V03Event); v1.0 has
// none, its stream ends after the last event.
func (m *Mapper) Final(ev *a2a.TaskStatusUpdateEvent) bool {
	for _, f := range m.finals {
		if f == ev {
			return true
		}
	}
	return false
}

// TextArtifact does for a plain text chunk that is not final (the frame's
// request, task, context and response ids in r; llm its
// llm_response_id, "" for none) what Events does, and returns what the
// one TaskArtifactUpdateEvent Events builds for it carries: its artifact
// id, its append flag and its metadata's llm_response_id. A renderer that
// writes the event from the frame's bytes (A2A's text fast path) calls it
// instead of Events.
func (m *Mapper) TextArtifact(r *e2a.Response, llm string) (id a2a.ArtifactID, appendTo bool, metaLLM string) {
	m.bind(r)
	defer m.primed(r)
	if llm != "" {
		id = a2a.ArtifactID(llm)
		m.runKey, m.runID = "", "" // as pieceArtifactID
	} else {
		id = m.pieceArtifactID(r, piece{objectType: ObjectChatCompletionChunk, group: "content"})
		llm = string(id)
	}
	appendTo = m.seen[id] || m.resumed
	m.seen[id], m.content, m.taskStream = true, true, true
	return id, appendTo, llm
}

// primed notes that r was mapped: while a resumed stream's mapper is
// given the frames before its resume point, the next one in order, and
// with the last of them it knows what the client has (resumed cleared). A
// gap (a frame aged out, or one that did not decode) keeps it resumed.
func (m *Mapper) primed(r *e2a.Response) {
	if m.resumed && r.Sequence == m.next && r.Sequence < m.from {
		m.next++
		m.resumed = m.next < m.from
	}
}

func (m *Mapper) bind(r *e2a.Response) {
	if m.requestID == "" {
		m.requestID = r.RequestID
	}
	if m.taskID == "" {
		m.taskID = a2a.TaskID(r.TaskID)
		if m.taskID == "" {
			m.taskID = a2a.TaskID(r.RequestID)
		}
	}
	if m.contextID == "" {
		m.contextID = r.ContextID
		if m.contextID == "" {
			m.contextID = string(m.taskID)
		}
	}
}

func (m *Mapper) artifactID(r *e2a.Response) a2a.ArtifactID {
	if id := LLMResponseID(r); id != "" {
		return a2a.ArtifactID(id)
	}
	return a2a.ArtifactID(r.RequestID)
}

// pieceArtifactID is the artifact of a content chunk: its
// llm_response_id (trpc spec), else one artifact per run of text or of
// reasoning chunks (consecutive chunks without llm_response_id: a chunk
// with one ends the run, as it ends the Aggregator's content message)
// and one per tool or other event, named after the frame's response_id.
func (m *Mapper) pieceArtifactID(r *e2a.Response, p piece) a2a.ArtifactID {
	if id := LLMResponseID(r); id != "" {
		m.runKey, m.runID = "", "" // a run is of consecutive chunks (the Aggregator's content message)
		return a2a.ArtifactID(id)
	}
	key := p.group
	if p.thought {
		key = "thought"
	}
	if (key == "content" || key == "thought") && m.runKey == key && m.runID != "" {
		return m.runID
	}
	id := a2a.ArtifactID(r.ResponseID)
	if id == "" {
		id = a2a.ArtifactID(r.RequestID)
	}
	m.runKey, m.runID = key, id
	return id
}

// StatusUpdate is a status-update of the mapper's task (the submitted or
// working one a stream opens with; not final).
func (m *Mapper) StatusUpdate(state a2a.TaskState, ts *time.Time, msg *a2a.Message) *a2a.TaskStatusUpdateEvent {
	return &a2a.TaskStatusUpdateEvent{TaskID: m.taskID, ContextID: m.contextID,
		Status: a2a.TaskStatus{State: state, Timestamp: ts, Message: msg}}
}

// OpeningTask is the Task an A2A v1.0 stream of a task opens with (A2A
// v1.0 §3.1.2: a task's stream begins with the Task): p.Task, the task as
// tasks/get shows it when the call's turn is recorded, else the mapper's
// task with no history; in the submitted state, ts is its time unless it
// has one.
func (m *Mapper) OpeningTask(p Params, ts *time.Time) *a2a.Task {
	t := &a2a.Task{ID: m.taskID, ContextID: m.contextID, Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
	if p.Task != nil {
		c := *p.Task
		t = &c
	}
	if t.Status.State == a2a.TaskStateSubmitted && t.Status.Timestamp == nil {
		t.Status.Timestamp = ts
	}
	return t
}

// finalUpdate is the status-update a final frame ends the stream with.
func (m *Mapper) finalUpdate(state a2a.TaskState, ts *time.Time, msg *a2a.Message) *a2a.TaskStatusUpdateEvent {
	su := m.StatusUpdate(state, ts, msg)
	m.finals = append(m.finals, su)
	return su
}

// failureMessage is the agent message of a failed or canceled status:
// the agent's own (agentFailure), else the failure's code and text.
func (m *Mapper) failureMessage(r *e2a.Response, o Outcome) *a2a.Message {
	if msg := agentFailure(r); msg != nil && o.State == a2a.TaskStateFailed {
		m.ownMessage(msg, r)
		return msg
	}
	errMeta := map[string]any{"code": o.Code, "message": o.Message, "retryable": o.Retryable}
	if len(o.Details) > 0 {
		errMeta["details"] = o.Details
	}
	return &a2a.Message{ID: r.ResponseID, Role: a2a.MessageRoleAgent, TaskID: m.taskID, ContextID: m.contextID,
		Parts: a2a.ContentParts{textPart(o.Message, nil)}, Metadata: map[string]any{"error": errMeta}}
}

// Events maps the next frame r to the A2A events a stream carries for
// it: a content chunk's artifact-update, an a2a.* frame's own event, and
// after a final frame the status-update, preceded by the result's
// artifact-update when the request streamed no text (unless its own
// event closes the stream). An a2a.* frame whose body is not the A2A
// object it names has no event of its own: it is skipped, or, final, ends
// the stream failed ([UnreadableFinal]); it is logged once per mapper,
// never an error. [Mapper.Final] tells which status-update ends the
// stream.
func (m *Mapper) Events(r *e2a.Response) ([]a2a.Event, error) {
	m.bind(r)
	defer m.primed(r)
	m.finals = m.finals[:0]
	// Past its first frame a stream is its task's (taskStream).
	defer func() { m.taskStream = true }()
	var evs []a2a.Event
	o := Outcome{} // set for an unreadable a2a.* frame
	if c, ok := ContentChunk(r); ok {
		p, ok := chunkPiece(c)
		if ok {
			id := m.pieceArtifactID(r, p)
			llm := LLMResponseID(r)
			if llm == "" {
				llm = string(id)
			}
			l := artifactLabel(r)
			if p.group == "content" {
				p.parts[0].Metadata = withPartMeta(p.parts[0].Metadata, partMetadata(r))
				setPartFields(p.parts, partFieldsOf(r))
			}
			evs = append(evs, &a2a.TaskArtifactUpdateEvent{TaskID: m.taskID, ContextID: m.contextID,
				Artifact:  &a2a.Artifact{ID: id, Name: l.name, Description: l.description, Metadata: l.meta, Extensions: l.extensions, Parts: p.parts},
				Append:    m.seen[id] || m.resumed,
				LastChunk: r.Metadata[MetaArtifactLastChunk] == true,
				Metadata:  withEventMeta(p.meta(llm), r, MetaArtifactEventMetadata)})
			m.seen[id] = m.seen[id] || m.shown(p.parts)
			// Only the answer's text is the content the final result
			// repeats: after reasoning, tool calls or data alone the
			// result is still the answer (finalEvents), as in the task.
			m.content = m.content || answerText(p)
		}
	} else {
		ev, final, err := nativeV1(r)
		if err != nil {
			m.unreadable(r, err)
			o = unreadableOutcome
		} else if ev != nil {
			m.ownIDs(ev, r)
			streamParts(ev)
			if msg, ok := ev.(*a2a.Message); ok && r.IsFinal && m.taskStream {
				ev = m.replyUpdate(msg, r)
			} else if su, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && final {
				m.finals = append(m.finals, su)
			}
			evs = append(evs, ev)
		}
	}
	if !r.IsFinal {
		return evs, nil
	}
	if len(evs) > 0 && m.closing(evs[len(evs)-1]) {
		return evs, nil
	}
	if o.State == a2a.TaskStateUnspecified {
		o = FinalOutcome(r)
	}
	return m.finalEvents(r, evs, o), nil
}

// answerText reports a piece of the answer's text (a text chunk, not
// reasoning): the content an e2a.complete result repeats.
func answerText(p piece) bool { return p.group == "content" && !p.thought }

// agentFailure is the agent's own message of the failed status final
// frame r ends the task with (MetaStatusMessage), its parts given their
// mediaType and filename (MetaArtifactPartFields); nil for none, or one
// that is no A2A v0.3 Message.
func agentFailure(r *e2a.Response) *a2a.Message {
	if r.ResponseKind != e2a.KindError || r.Metadata[MetaStatusMessage] == nil {
		return nil
	}
	raw, err := json.Marshal(r.Metadata[MetaStatusMessage])
	if err != nil {
		return nil
	}
	var old legacy.Message
	if json.Unmarshal(raw, &old) != nil {
		return nil
	}
	msg, err := a2av0.ToV1Message(&old)
	if err != nil {
		return nil
	}
	if msg.Parts == nil {
		msg.Parts = a2a.ContentParts{}
	}
	setPartFields(msg.Parts, partFieldsOf(r))
	return msg
}

// finalEvents appends to evs, the events of final frame r (outcome o),
// those that end the stream.
func (m *Mapper) finalEvents(r *e2a.Response, evs []a2a.Event, o Outcome) []a2a.Event {
	ts := FrameTime(r)
	if Interrupted(o.State) && len(evs) > 0 {
		// The frame's own status-update, written without final: it ends
		// the stream all the same (the turn is over).
		if su, ok := evs[len(evs)-1].(*a2a.TaskStatusUpdateEvent); ok {
			m.finals = append(m.finals, su)
			return evs
		}
	}
	if o.State != a2a.TaskStateCompleted {
		su := m.finalUpdate(o.State, ts, m.failureMessage(r, o))
		su.Metadata = withEventMeta(nil, r, MetaStatusEventMetadata)
		return append(evs, su)
	}
	// The result of a request that streamed no text (content: reasoning,
	// tool calls and data are not its answer) is its one artifact, sent
	// whole (lastChunk). Streamed content is not closed by
	// an artifact-update of its own: one without parts is invalid
	// (a2a.proto: parts REQUIRED, at least one), and without append it
	// would replace the artifact; the completed status ends every
	// artifact of the task.
	if !m.content && o.HasResult {
		if parts := resultParts(o.Result); len(parts) > 0 {
			id := m.artifactID(r)
			evs = append(evs, &a2a.TaskArtifactUpdateEvent{TaskID: m.taskID, ContextID: m.contextID, LastChunk: true,
				Artifact: &a2a.Artifact{ID: id, Parts: parts}, Append: m.seen[id] || m.resumed,
				Metadata: piece{objectType: ObjectChatCompletion}.meta(LLMResponseID(r))})
		}
	}
	su := m.finalUpdate(a2a.TaskStateCompleted, ts, nil)
	su.Metadata = withEventMeta(nil, r, MetaStatusEventMetadata)
	return append(evs, su)
}

// withEventMeta is md, an event's own metadata (nil for none), with the
// members of the object frame r's metadata holds at key
// (MetaArtifactEventMetadata, MetaStatusEventMetadata) that md has not:
// the agent's event's metadata beside the mapping's own.
func withEventMeta(md map[string]any, r *e2a.Response, key string) map[string]any {
	ev, _ := r.Metadata[key].(map[string]any)
	if len(ev) == 0 {
		return md
	}
	out := maps.Clone(ev)
	maps.Copy(out, md)
	return out
}

// streamParts gives an agent's own artifact-update or message without
// parts an empty list, never null, as a stream writes them (clients
// require the member).
func streamParts(ev a2a.Event) {
	switch e := ev.(type) {
	case *a2a.TaskArtifactUpdateEvent:
		if e.Artifact != nil && e.Artifact.Parts == nil {
			e.Artifact.Parts = a2a.ContentParts{}
		}
	case *a2a.Message:
		if e.Parts == nil {
			e.Parts = a2a.ContentParts{}
		}
	}
}

// jsonString returns v as the JSON string every trpc spec example carries
// in function_call.args and function_response.response: a string as is,
// anything else (an object the agent wrote) encoded.
func jsonString(v any) any {
	switch t := v.(type) {
	case nil, string:
		return v
	default:
		b, err := json.Marshal(t)
		if err != nil {
			return v
		}
		return string(b)
	}
}

// dropNil removes the members whose value is absent.
func dropNil(m map[string]any) map[string]any {
	for k, v := range m {
		if v == nil {
			delete(m, k)
		}
	}
	return m
}
