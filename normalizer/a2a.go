package normalizer

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// A2A v0.3 JSON-RPC methods.
const (
	A2AMessageSend                  = "message/send"
	A2AMessageStream                = "message/stream"
	A2ATasksGet                     = "tasks/get"
	A2ATasksCancel                  = "tasks/cancel"
	A2ATasksResubscribe             = "tasks/resubscribe"
	A2APushConfigSet                = "tasks/pushNotificationConfig/set"
	A2APushConfigGet                = "tasks/pushNotificationConfig/get"
	A2APushConfigList               = "tasks/pushNotificationConfig/list"
	A2APushConfigDelete             = "tasks/pushNotificationConfig/delete"
	A2AGetAuthenticatedExtendedCard = "agent/getAuthenticatedExtendedCard"
)

// Message metadata keys of the trpc-agent-go interaction specification.
const (
	A2AMetaInteractionSpecVersion = "interaction_spec_version"
	A2AMetaInvocationID           = "invocation_id"
	A2AMetaUserID                 = "user_id"
)

// a2aMessageWire is an A2A Message as sent; parts are decoded one by one
// into a2a types so that numbers in data parts stay exact (a2a-go's own
// decoder reads them as float64).
type a2aMessageWire struct {
	Kind           string          `json:"kind"`
	ID             string          `json:"messageId"`
	ContextID      string          `json:"contextId"`
	TaskID         a2a.TaskID      `json:"taskId"`
	Role           a2a.MessageRole `json:"role"`
	Parts          []any           `json:"parts"`
	Metadata       map[string]any  `json:"metadata"`
	Extensions     []string        `json:"extensions"`
	ReferenceTasks []a2a.TaskID    `json:"referenceTaskIds"`
}

type a2aSendParamsWire struct {
	Message  *a2aMessageWire        `json:"message"`
	Config   *a2a.MessageSendConfig `json:"configuration"`
	Metadata map[string]any         `json:"metadata"`
}

// FromA2A normalizes an A2A v0.3 JSON-RPC request (a2a-interaction-spec-trpc
// and the official v0.3 binding).
//
// message/send and message/stream (OpSubmit; is_stream for stream):
//
//   - message_id ← messageId; context_id ← contextId (a new one when
//     absent from a new task: details context_created; a continued task
//     keeps its own, set by the front door); task_id ← taskId (details
//     task_continued), or a new one (details task_created);
//   - params.text: the text parts that are not thoughts, joined by "\n";
//     params.content_blocks (ACP-shaped text and resource_link blocks, part
//     metadata in _meta) when the message is more than one plain text part;
//     params.files: file parts as E2AFileRef (uri, name, mime_type; inline
//     bytes as a data: URI); params.data_parts: data parts kept as
//     {"data", "metadata"}; params.part_order, the order of the parts in
//     those, when params.text, files and data_parts in that order are not
//     the message as sent (a2aPartsToParams); params.reference_task_ids,
//     params.extensions, params.role when "agent";
//   - configuration: acceptedOutputModes → expected_output_modes,
//     blocking → params.blocking, historyLength → params.history_length,
//     pushNotificationConfig → params.push_notification_config with token
//     and credentials stripped;
//   - message metadata → a2a_metadata (interop only), and also:
//     invocation_id → correlation_id, user_id → user_id (after X-User-ID),
//     interaction_spec_version → provenance.details; request-level
//     params.metadata → channel_context.a2a_request_metadata.
//
// tasks/get (OpQuery; historyLength → params.history_length), tasks/cancel
// (OpCancel) and tasks/resubscribe (OpSubscribe, is_stream): task_id ← id,
// metadata → a2a_metadata.
//
// Errors: ErrParse, ErrInvalidRequest, ErrMethodNotFound,
// ErrUnsupportedOperation (push notification config, extended card),
// ErrInvalidParams (no message, messageId, role or parts; a part without
// its content; a task method without id).
func (n *Normalizer) FromA2A(in Input) (*Result, error) {
	r, rq, err := n.beginRPC(in, e2a.SourceA2A, ProtocolA2A)
	if err != nil {
		return nil, err
	}
	switch rq.Method {
	case A2AMessageSend, A2AMessageStream:
		return r.a2aSend(rq)
	case A2ATasksGet, A2ATasksCancel, A2ATasksResubscribe:
		return r.a2aTask(rq)
	case A2APushConfigSet, A2APushConfigGet, A2APushConfigList, A2APushConfigDelete:
		return nil, rq.errf(ErrPushNotificationNotSupported, ProtocolA2A, "push notifications are not offered by this server")
	case A2AGetAuthenticatedExtendedCard:
		return nil, rq.errf(ErrExtendedCardNotConfigured, ProtocolA2A, "no authenticated extended card is configured")
	}
	return nil, rq.errf(ErrMethodNotFound, ProtocolA2A, "not an A2A v0.3 method")
}

func (r *req) a2aSend(rq *rpcRequest) (*Result, error) {
	var p a2aSendParamsWire
	if !readA2ASendFast(rq.Params, &p) {
		if err := rq.decodeParams(ProtocolA2A, &p); err != nil {
			return nil, err
		}
	}
	msg, err := a2aSendMessage(rq, p.Message)
	if err != nil {
		return nil, err
	}
	env := r.newEnvelope(rq.Method)
	rq.setJSONRPC(env)
	env.IsStream = rq.Method == A2AMessageStream
	env.Provenance.Details[DetailA2AVersion] = A2AVersion
	env.MessageID = msg.ID
	r.a2aTaskIDs(env, &msg)
	env.Params = a2aMessageParams(&msg)
	if err := r.a2aSendConfig(rq, env, p.Config); err != nil {
		return nil, err
	}
	var claimed []string
	if u := a2aSendMetadata(env, &msg, p.Metadata); u != "" {
		claimed = append(claimed, u)
	}
	if msg.Role == a2a.MessageRoleAgent && env.IdentityOrigin == "" && (r.Principal == nil || r.Principal.AssertsUser) {
		env.IdentityOrigin = e2a.IdentityAgent
	}
	return r.finish(env, OpSubmit, !rq.HasID, claimed...)
}

// a2aSendMessage checks the message of message/send or message/stream and
// decodes its parts (the first error is the call's).
func a2aSendMessage(rq *rpcRequest, w *a2aMessageWire) (a2a.Message, error) {
	bad := func(format string, a ...any) (a2a.Message, error) {
		return a2a.Message{}, rq.errf(ErrInvalidParams, ProtocolA2A, format, a...)
	}
	switch {
	case w == nil:
		return bad("message is required")
	case w.Kind != "" && w.Kind != "message":
		return bad("message.kind must be \"message\"")
	case w.ID == "":
		return bad("message.messageId is required")
	case w.Role != a2a.MessageRoleUser && w.Role != a2a.MessageRoleAgent:
		return bad("message.role must be \"user\" or \"agent\"")
	case len(w.Parts) == 0:
		return bad("message.parts must not be empty")
	}
	msg := a2a.Message{
		ID: w.ID, ContextID: w.ContextID, TaskID: w.TaskID, Role: w.Role,
		Metadata: w.Metadata, Extensions: w.Extensions, ReferenceTasks: w.ReferenceTasks,
		Parts: make(a2a.ContentParts, 0, len(w.Parts)),
	}
	for i, raw := range w.Parts {
		part, msgErr := decodeA2APart(raw)
		if msgErr != "" {
			return bad("message.parts[%d]: %s", i, msgErr)
		}
		// A file part's media type is checked by the door against the
		// input modes of the pool the message goes to (CheckInputModes),
		// known only once the message is routed.
		msg.Parts = append(msg.Parts, part)
	}
	return msg, nil
}

// a2aTaskIDs sets env's context and task from msg, making new ones (and
// saying so in the provenance details) where the message names none.
func (r *req) a2aTaskIDs(env *e2a.Envelope, msg *a2a.Message) {
	d := env.Provenance.Details
	env.ContextID = msg.ContextID
	if env.ContextID == "" && msg.TaskID == "" {
		// A new task without a context starts one; a continued task keeps
		// its own (the front door reads it from the task's record).
		env.ContextID = r.NewID()
		d[DetailContextCreated] = true
	}
	env.TaskID = string(msg.TaskID)
	if env.TaskID == "" {
		d[DetailTaskCreated] = true // named by finish: its request id
	} else {
		d[DetailTaskContinued] = true
	}
}

// a2aMessageParams are the envelope params of msg: its parts, its role
// when the agent's, its reference tasks and extensions.
func a2aMessageParams(msg *a2a.Message) map[string]any {
	params := a2aPartsToParams(msg.Parts)
	if msg.Role == a2a.MessageRoleAgent {
		params["role"] = string(msg.Role)
	}
	if len(msg.ReferenceTasks) > 0 {
		ids := make([]any, len(msg.ReferenceTasks))
		for i, t := range msg.ReferenceTasks {
			ids[i] = string(t)
		}
		params["reference_task_ids"] = ids
	}
	if len(msg.Extensions) > 0 {
		ext := make([]any, len(msg.Extensions))
		for i, x := range msg.Extensions {
			ext[i] = x
		}
		params["extensions"] = ext
	}
	return params
}

// a2aSendConfig puts the send configuration c (nil: none) in env: output
// modes, blocking, history length, the inline push config with its
// secrets stripped.
func (r *req) a2aSendConfig(rq *rpcRequest, env *e2a.Envelope, c *a2a.MessageSendConfig) error {
	if c == nil {
		return nil
	}
	if c.HistoryLength != nil && *c.HistoryLength < 0 {
		return rq.errf(ErrInvalidParams, ProtocolA2A, "configuration.historyLength must not be negative")
	}
	if len(c.AcceptedOutputModes) > 0 {
		env.ExpectedOutputModes = c.AcceptedOutputModes
	}
	if c.Blocking != nil {
		env.Params["blocking"] = *c.Blocking
	}
	if c.HistoryLength != nil {
		env.Params["history_length"] = json.Number(itoa(*c.HistoryLength))
	}
	if c.PushConfig != nil {
		pc, stripped := r.pushConfig(c.PushConfig)
		env.Params["push_notification_config"] = pc
		if stripped > 0 {
			env.Provenance.Details[DetailStrippedSecrets] = stripped
		}
	}
	return nil
}

// a2aSendMetadata puts the message's and the request's metadata in env and
// returns the user id the message claims ("" for none).
func a2aSendMetadata(env *e2a.Envelope, msg *a2a.Message, reqMeta map[string]any) (claimed string) {
	d := env.Provenance.Details
	if len(msg.Metadata) > 0 {
		env.A2AMetadata = msg.Metadata
		if v := str(msg.Metadata, A2AMetaInteractionSpecVersion); v != "" {
			d[DetailInteractionSpecVersion] = v
		}
		env.CorrelationID = str(msg.Metadata, A2AMetaInvocationID)
		claimed = str(msg.Metadata, A2AMetaUserID)
	}
	if len(reqMeta) > 0 {
		env.ChannelContext = map[string]any{"a2a_request_metadata": reqMeta}
	}
	return claimed
}

func (r *req) a2aTask(rq *rpcRequest) (*Result, error) {
	var id a2a.TaskID
	var meta map[string]any
	var history *int
	if rq.Method == A2ATasksGet {
		var p a2a.TaskQueryParams
		if err := rq.decodeParams(ProtocolA2A, &p); err != nil {
			return nil, err
		}
		id, meta, history = p.ID, p.Metadata, p.HistoryLength
	} else {
		var p a2a.TaskIDParams
		if err := rq.decodeParams(ProtocolA2A, &p); err != nil {
			return nil, err
		}
		id, meta = p.ID, p.Metadata
	}
	if id == "" {
		return nil, rq.errf(ErrInvalidParams, ProtocolA2A, "id is required")
	}
	if history != nil && *history < 0 {
		return nil, rq.errf(ErrInvalidParams, ProtocolA2A, "historyLength must not be negative")
	}
	env := r.newEnvelope(rq.Method)
	rq.setJSONRPC(env)
	env.TaskID = string(id)
	if history != nil {
		env.Params = map[string]any{"history_length": json.Number(itoa(*history))}
	}
	if len(meta) > 0 {
		env.A2AMetadata = meta
	}
	return r.finishTask(env, rq)
}

// finishTask finishes env, a JSON-RPC call on a task (A2A v0.3's
// tasks/get, tasks/cancel and tasks/resubscribe; AgentVault's tasks/get,
// tasks/cancel and tasks/sendSubscribe with only an id): OpCancel for
// tasks/cancel (AVTasksCancel is the same method), OpSubscribe (streamed)
// for a resubscription, OpQuery otherwise.
func (r *req) finishTask(env *e2a.Envelope, rq *rpcRequest) (*Result, error) {
	op := OpQuery
	switch rq.Method {
	case A2ATasksCancel:
		op = OpCancel
	case A2ATasksResubscribe, AVTasksSendSubscribe:
		op = OpSubscribe
		env.IsStream = true
	}
	return r.finish(env, op, !rq.HasID)
}

// pushConfig keeps an A2A push notification config without its secrets
// (token and credentials become references or are dropped, the URL is
// kept as its scheme and host: webhookURL) and counts the secrets it
// removed.
func (r *req) pushConfig(pc *a2a.PushConfig) (map[string]any, int) {
	stripped := 0
	u, creds := webhookURL(pc.URL)
	if creds {
		stripped++
	}
	out := map[string]any{"url": u}
	if pc.ID != "" {
		out["id"] = pc.ID
	}
	if pc.Token != "" {
		stripped++
		if ref := r.ref("a2a_push_token", pc.Token); ref != "" {
			out["token_ref"] = ref
		}
	}
	if pc.Auth != nil {
		auth := map[string]any{}
		schemes := make([]any, len(pc.Auth.Schemes))
		for i, s := range pc.Auth.Schemes {
			schemes[i] = s
		}
		auth["schemes"] = schemes
		if pc.Auth.Credentials != "" {
			stripped++
			if ref := r.ref("a2a_push_credentials", pc.Auth.Credentials); ref != "" {
				auth["credentials_ref"] = ref
			}
		}
		out["authentication"] = auth
	}
	return out, stripped
}

// ref returns the SecretRef reference of a secret, or "".
func (r *req) ref(kind, value string) string {
	if r.n.secretRef == nil {
		return ""
	}
	return r.n.secretRef(kind, value)
}

// decodeA2APart reads one decoded A2A part into an a2a type; the message
// is empty on success.
func decodeA2APart(raw any) (a2a.Part, string) {
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, "must be an object"
	}
	kind := str(m, "kind")
	if kind == "" {
		kind = str(m, "type") // A2A before v0.3
	}
	var meta map[string]any
	if v, ok := m["metadata"]; ok && v != nil {
		if meta, ok = v.(map[string]any); !ok {
			return nil, "metadata must be an object"
		}
	}
	switch kind {
	case "text":
		t, ok := m["text"].(string)
		if !ok {
			return nil, "a text part needs a string text"
		}
		return a2a.TextPart{Text: t, Metadata: meta}, ""
	case "data":
		d, ok := m["data"].(map[string]any)
		if !ok {
			return nil, "a data part needs an object data"
		}
		return a2a.DataPart{Data: d, Metadata: meta}, ""
	case "file":
		f, ok := m["file"].(map[string]any)
		if !ok {
			return nil, "a file part needs an object file"
		}
		fm := a2a.FileMeta{MimeType: str(f, "mimeType"), Name: str(f, "name")}
		b, u := str(f, "bytes"), str(f, "uri")
		switch {
		case b != "" && u != "":
			return nil, "a file has bytes or uri, not both"
		case b != "" && !validBase64(b):
			return nil, "a file's bytes must be base64 (RFC 4648, padded)"
		case b != "":
			return a2a.FilePart{File: a2a.FileBytes{FileMeta: fm, Bytes: b}, Metadata: meta}, ""
		case u != "":
			return a2a.FilePart{File: a2a.FileURI{FileMeta: fm, URI: u}, Metadata: meta}, ""
		}
		return nil, "a file needs bytes or uri"
	case "":
		return nil, "kind is required"
	}
	return nil, "unknown part kind " + echo(kind)
}

// PartOrder is the params member that gives the order of an A2A
// message's parts when the other members do not (a2aPartsToParams).
const PartOrder = "part_order"

// a2aPartsToParams maps A2A parts to E2A params (see FromA2A).
//
// The parts are in params in another shape than sent (text parts joined,
// then files, then data parts), which the task's history rebuilds the
// message from (a2amap's userMessage): params.text, params.files and
// params.data_parts in that order. When that would not be the message as
// sent (parts in another order, more than one text part, a text part with
// metadata or an empty one, a file part with metadata or bytes without a
// media type), params.part_order gives the order of its parts, one letter
// a part: "t" the next text block of params.content_blocks (params.text
// when there is none), "f" the next of params.files, "d" the next of
// params.data_parts; every part's content and metadata is in those
// members, redacted as they are. A message of one text part without
// metadata, the common case, has none.
func a2aPartsToParams(parts a2a.ContentParts) map[string]any {
	params := map[string]any{}
	var texts []string
	var blocks, files, data []any
	plain := true // the message is one text part without metadata
	// asText: params.text, files and data_parts rebuild the message
	// (the parts so far have been: one text part at most, then files,
	// then data parts); stage is the kind of the last part (0 text, 1
	// file, 2 data).
	asText, stage, ntext := true, 0, 0
	for _, part := range parts {
		switch p := part.(type) {
		case a2a.TextPart:
			b := map[string]any{"type": "text", "text": p.Text}
			if len(p.Metadata) > 0 {
				b["_meta"] = p.Metadata
				plain = false
			}
			if th, _ := p.Metadata["thought"].(bool); !th {
				texts = append(texts, p.Text)
			}
			blocks = append(blocks, b)
			ntext++
			asText = asText && stage == 0 && ntext == 1 && len(p.Metadata) == 0 && p.Text != ""
		case a2a.FilePart:
			plain = false
			// Bytes without a media type are read back as a data: URI's
			// application/octet-stream.
			fb, isBytes := p.File.(a2a.FileBytes)
			asText = asText && stage <= 1 && len(p.Metadata) == 0 && (!isBytes || fb.MimeType != "")
			stage = 1
			fr := map[string]any{}
			var fm a2a.FileMeta
			switch f := p.File.(type) {
			case a2a.FileURI:
				fm = f.FileMeta
				fr["uri"] = f.URI
				name := fm.Name
				if name == "" {
					name = uriFileName(f.URI)
				}
				b := map[string]any{"type": "resource_link", "uri": f.URI, "name": name}
				putFileMeta(b, "mimeType", fm.MimeType, p.Metadata)
				blocks = append(blocks, b)
			case a2a.FileBytes:
				fm = f.FileMeta
				mt := fm.MimeType
				if mt == "" || strings.ContainsRune(mt, ',') {
					// The data: URI's media type ends at its first ","
					// (a quoted parameter may hold one): the bytes would
					// be read as a URL. mime_type keeps it whole.
					mt = "application/octet-stream"
				}
				fr["uri"] = "data:" + mt + ";base64," + f.Bytes
			}
			if fm.Name != "" {
				fr["name"] = fm.Name
			}
			putFileMeta(fr, "mime_type", fm.MimeType, p.Metadata)
			files = append(files, fr)
		case a2a.DataPart:
			plain = false
			stage = 2
			dp := map[string]any{"data": p.Data}
			if len(p.Metadata) > 0 {
				dp["metadata"] = p.Metadata
			}
			data = append(data, dp)
		}
	}
	if len(texts) > 0 {
		params["text"] = strings.Join(texts, "\n")
	}
	if !plain || len(blocks) > 1 {
		if len(blocks) > 0 {
			params["content_blocks"] = blocks
		}
	}
	if len(files) > 0 {
		params["files"] = files
	}
	if len(data) > 0 {
		params["data_parts"] = data
	}
	if !asText {
		params[PartOrder] = partOrder(parts)
	}
	return params
}

// partOrder is params.part_order of parts (a2aPartsToParams).
func partOrder(parts a2a.ContentParts) string {
	order := make([]byte, 0, len(parts))
	for _, part := range parts {
		switch part.(type) {
		case a2a.TextPart:
			order = append(order, 't')
		case a2a.FilePart:
			order = append(order, 'f')
		case a2a.DataPart:
			order = append(order, 'd')
		}
	}
	return string(order)
}

// uriFileName names a file given by uri without a name: the last segment
// of its path, unescaped, "file" when it has none; never its query or
// fragment (a presigned URL's signature) nor a data: URI's content.
func uriFileName(uri string) string {
	name := ""
	if u, err := url.Parse(uri); err == nil && u.Opaque == "" {
		name = path.Base(strings.TrimRight(u.Path, "/"))
	}
	if name == "" || name == "." || name == "/" {
		return "file"
	}
	return name
}

// validBase64 reports whether s is standard padded base64 (line breaks
// allowed, as MIME encoders write them): what the readers of
// params.files decode a data: URI's bytes with. It decodes through a
// small buffer, so a large file is not copied.
func validBase64(s string) bool {
	_, err := io.Copy(io.Discard, base64.NewDecoder(base64.StdEncoding, strings.NewReader(s)))
	return err == nil
}

// putFileMeta sets a file part's media type (under mimeKey: ACP's content
// block spells it mimeType, E2A's files mime_type) and its metadata (_meta)
// on m, each when it has one.
func putFileMeta(m map[string]any, mimeKey, mimeType string, meta map[string]any) {
	if mimeType != "" {
		m[mimeKey] = mimeType
	}
	if len(meta) > 0 {
		m["_meta"] = meta
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A2AInputModes are the media types the agent card declares as
// defaultInputModes, and the input modes of a pool that declares none
// (CheckInputModes): a FilePart of another type is refused with
// ErrContentTypeNotSupported.
var A2AInputModes = []string{"text/plain", "application/json"}

// AcceptsSomeOf reports whether modes accept some media type of top-level
// type top ("image", "audio"): a mode top/<any subtype>, top/*, or a
// wildcard; parameters and case as AcceptsMediaType reads them (ACP's
// promptCapabilities: may a pool take some image at all).
func AcceptsSomeOf(modes []string, top string) bool {
	for _, m := range modes {
		switch m = bareMediaType(m); {
		case m == "*", m == "*/*", strings.HasPrefix(m, top+"/"):
			return true
		}
	}
	return false
}

// AcceptsMediaType reports whether media type mt is one of modes, as an
// A2A card's input modes list them: parameters ignored and case folded on
// both sides, and a mode may be a wildcard ("image/*", "*/*").
func AcceptsMediaType(modes []string, mt string) bool {
	mt = bareMediaType(mt)
	top, _, _ := strings.Cut(mt, "/")
	for _, m := range modes {
		switch m = bareMediaType(m); {
		case m == mt, m == "*/*", m == "*":
			return true
		case strings.HasSuffix(m, "/*") && m[:len(m)-2] == top:
			return true
		}
	}
	return false
}

// bareMediaType is mt without its parameters, trimmed and lower-cased.
func bareMediaType(mt string) string {
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = mt[:i]
	}
	return strings.ToLower(strings.TrimSpace(mt))
}

// CheckInputModes refuses an A2A message (env, as FromA2A normalized it)
// to pool whose input modes (modes; A2AInputModes when empty: the pool
// declares none) do not accept the media type of one of its file parts
// (params.files' mime_type; a file without one is not checked), with
// ErrContentTypeNotSupported naming the pool and its modes. The doors call
// it once the message's pool is known (the pool a continued task is in
// included), before anything is published, so that a pool's card and its
// door agree.
func CheckInputModes(env *e2a.Envelope, pool string, modes []string) error {
	if len(modes) == 0 {
		modes = A2AInputModes
	}
	files, _ := env.Params["files"].([]any)
	for i, f := range files {
		fr, _ := f.(map[string]any)
		mt, _ := fr["mime_type"].(string)
		if mt != "" && !AcceptsMediaType(modes, mt) {
			e := newErr(ErrContentTypeNotSupported, ProtocolA2A, "file %d: media type %s is not accepted by agent pool %s (input modes %v)", i, echo(mt), echo(pool), modes)
			e.JSONRPCID = env.JSONRPCID
			return e
		}
	}
	return nil
}
