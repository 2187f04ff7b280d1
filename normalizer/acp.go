package normalizer

import (
	"encoding/json"
	"fmt"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// acpMethods are the client → agent methods an ACP agent accepts: those of
// the specification (e2a.ACPClientToAgentMethods) and those of the ACP Go
// SDK (unstable ones included). A method starting with "_" is an ACP
// extension method and is always accepted (as method "ext").
var acpMethods = func() map[string]bool {
	m := map[string]bool{}
	for _, x := range e2a.ACPClientToAgentMethods {
		m[x] = true
	}
	for _, x := range []string{
		acp.AgentMethodAuthenticate, acp.AgentMethodInitialize, acp.AgentMethodLogout,
		acp.AgentMethodSessionCancel, acp.AgentMethodSessionClose, acp.AgentMethodSessionFork,
		acp.AgentMethodSessionList, acp.AgentMethodSessionLoad, acp.AgentMethodSessionNew,
		acp.AgentMethodSessionPrompt, acp.AgentMethodSessionResume, acp.AgentMethodSessionSetConfigOption,
		acp.AgentMethodSessionSetMode, acp.AgentMethodSessionSetModel,
		acp.AgentMethodDocumentDidChange, acp.AgentMethodDocumentDidClose, acp.AgentMethodDocumentDidFocus,
		acp.AgentMethodDocumentDidOpen, acp.AgentMethodDocumentDidSave, acp.AgentMethodMcpMessage,
		acp.AgentMethodNesAccept, acp.AgentMethodNesClose, acp.AgentMethodNesReject, acp.AgentMethodNesStart,
		acp.AgentMethodNesSuggest, acp.AgentMethodProvidersDisable, acp.AgentMethodProvidersList,
		acp.AgentMethodProvidersSet,
	} {
		m[x] = true
	}
	return m
}()

// acpSessionMethods need a session id in their params: those whose
// request (or notification) type in ACP's schema, as the ACP Go SDK has
// it, has a required sessionId.
var acpSessionMethods = map[string]bool{
	e2a.ACPSessionPrompt: true, e2a.ACPSessionCancel: true, e2a.ACPSessionLoad: true, e2a.ACPSessionSetMode: true,
	acp.AgentMethodSessionSetModel: true, acp.AgentMethodSessionSetConfigOption: true,
	acp.AgentMethodSessionClose: true, acp.AgentMethodSessionFork: true, acp.AgentMethodSessionResume: true,
	acp.AgentMethodDocumentDidChange: true, acp.AgentMethodDocumentDidClose: true, acp.AgentMethodDocumentDidFocus: true,
	acp.AgentMethodDocumentDidOpen: true, acp.AgentMethodDocumentDidSave: true,
	acp.AgentMethodNesAccept: true, acp.AgentMethodNesClose: true, acp.AgentMethodNesReject: true, acp.AgentMethodNesSuggest: true,
}

// acpNotifications are sent without an id.
var acpNotifications = map[string]bool{e2a.ACPSessionCancel: true}

// acpOp classifies ACP methods.
func acpOp(method string) Op {
	switch method {
	case e2a.ACPInitialize, e2a.ACPAuthenticate, acp.AgentMethodLogout:
		return OpLocal
	case e2a.ACPSessionCancel:
		return OpCancel
	}
	return OpSubmit
}

// FromACP normalizes an ACP JSON-RPC 2.0 request (spec §8, §11.3):
//
//   - method is the ACP method; an extension method ("_vendor/x") becomes
//     method "ext" with ext_method set;
//   - jsonrpc_id is the request id (see the JSON-RPC id rule in jsonrpc.go);
//   - session_id from params.sessionId (ACP) or params.session_id (the
//     spec's form); message_id from params.messageId;
//   - params are kept exactly as sent (_meta included);
//   - provenance source_protocol "acp", details jsonrpc_method and op;
//   - is_stream for session/prompt (answered with session/update
//     notifications before the result).
//
// Op: initialize, authenticate and logout are OpLocal, session/cancel is
// OpCancel, everything else OpSubmit.
//
// Errors: ErrParse, ErrInvalidRequest (not JSON-RPC 2.0), ErrMethodNotFound
// (not an ACP client → agent method), ErrInvalidParams (params not an
// object; no session id where the schema requires one: session/prompt,
// cancel, load, set_mode, set_model, set_config_option, close, fork,
// resume, the document/* and nes/* methods but nes/start; a sessionId or
// session_id that is not a string, on any method; a session/prompt without
// a prompt array, content_blocks or text).
func (n *Normalizer) FromACP(in Input) (*Result, error) {
	r, rq, err := n.beginRPC(in, e2a.SourceACP, ProtocolACP)
	if err != nil {
		return nil, err
	}
	method := rq.Method
	ext := strings.HasPrefix(method, "_")
	if !ext && !acpMethods[method] {
		return nil, rq.errf(ErrMethodNotFound, ProtocolACP, "not an ACP client-to-agent method")
	}
	params, err := rq.paramsObject(ProtocolACP, !acpSessionMethods[method])
	if err != nil {
		return nil, err
	}
	sessionID, msg := acpSessionID(params, acpSessionMethods[method])
	if msg != "" {
		return nil, rq.errf(ErrInvalidParams, ProtocolACP, "%s", msg)
	}
	if method == e2a.ACPSessionPrompt {
		if err := checkACPPrompt(params); err != "" {
			return nil, rq.errf(ErrInvalidParams, ProtocolACP, "%s", err)
		}
	}
	env := r.newEnvelope(method)
	if ext {
		env.Method = "ext"
		env.ExtMethod = method
	}
	rq.setJSONRPC(env)
	env.SessionID = sessionID
	env.MessageID = str(params, "messageId")
	env.IsStream = method == e2a.ACPSessionPrompt
	if len(params) > 0 {
		env.Params = params
	}
	return r.finish(env, acpOp(method), !rq.HasID)
}

// acpSessionID returns the session id of ACP params: sessionId (ACP's
// spelling), else session_id (the spec's). Either, when present and not
// null, must be a string, whatever the method (a front door reads a named
// session as the one the call goes into); a required one must be
// non-empty. The message says what is wrong, "" when nothing is.
func acpSessionID(params map[string]any, required bool) (id, msg string) {
	for _, k := range []string{"sessionId", "session_id"} {
		v, has := params[k]
		if !has || v == nil {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return "", k + " must be a string"
		}
		if id == "" {
			id = s
		}
	}
	if required && id == "" {
		return "", "sessionId is required"
	}
	return id, ""
}

// ACPSessionID is the session an ACP call's params name, as FromACP reads
// it (sessionId, else session_id): "" when they name none, or not as a
// string. A transport that orders or cancels a session's calls before
// they are decoded (stdio) reads it so.
func ACPSessionID(params map[string]any) string {
	id, msg := acpSessionID(params, false)
	if msg != "" {
		return ""
	}
	return id
}

// checkACPPrompt checks the prompt of session/prompt params: an array of
// ACP content blocks (a known type with its required fields, as the
// outbound path asks of them: requiredBlockFields), or, failing a prompt,
// the E2A sources MergeParamsToACPPrompt fills it from. The message names
// the first invalid block by its index.
func checkACPPrompt(params map[string]any) string {
	p, has := params["prompt"]
	if !has || p == nil {
		if cb, ok := params["content_blocks"].([]any); ok && len(cb) > 0 {
			return ""
		}
		for _, k := range []string{"text", "content", "query"} {
			if s, ok := params[k].(string); ok && s != "" {
				return ""
			}
		}
		return "prompt is required"
	}
	blocks, ok := p.([]any)
	if !ok {
		return "prompt must be an array of content blocks"
	}
	for i, b := range blocks {
		m, ok := b.(map[string]any)
		if !ok || str(m, "type") == "" {
			return fmt.Sprintf("prompt[%d]: every prompt content block needs a string type", i)
		}
		if msg := requiredBlockFields(camelBlock(m).(map[string]any)); msg != "" {
			return fmt.Sprintf("prompt[%d]: %s", i, msg)
		}
	}
	return ""
}

// EnvelopeFromACPJSONRPC is envelope_from_acp_jsonrpc of the specification
// (§8): FromACP with the default configuration and no transport facts.
func EnvelopeFromACPJSONRPC(msg []byte) (*e2a.Envelope, error) {
	res, err := New(Config{}).FromACP(Input{Body: msg})
	if err != nil {
		return nil, err
	}
	return res.Envelope, nil
}

// MergeParamsToACPPrompt is merge_params_to_acp_prompt of the
// specification (§7). If and only if env.Method is "session/prompt", on a
// shallow copy of params:
//
//  1. an existing (non-null) prompt is never overwritten;
//  2. else a non-empty params.content_blocks array becomes the prompt;
//  3. else the first non-empty string of params.text, params.content,
//     params.query becomes [{"type":"text","text":…}];
//  4. env.SessionID is set as params.session_id when that key is absent;
//  5. env.ACPMeta is merged into params._meta (a new map; acp_meta keys
//     win over existing _meta keys).
//
// For any other method it returns a shallow copy of params. It never
// modifies env, and returns a non-nil map.
func MergeParamsToACPPrompt(env *e2a.Envelope) map[string]any {
	out := make(map[string]any, len(env.Params)+3)
	for k, v := range env.Params {
		out[k] = v
	}
	if env.Method != e2a.ACPSessionPrompt {
		return out
	}
	if p, ok := out["prompt"]; !ok || p == nil {
		if cb, ok := out["content_blocks"].([]any); ok && len(cb) > 0 {
			out["prompt"] = cb
		} else {
			for _, k := range []string{"text", "content", "query"} {
				if s, ok := out[k].(string); ok && s != "" {
					out["prompt"] = []any{map[string]any{"type": "text", "text": s}}
					break
				}
			}
		}
	}
	if env.SessionID != "" {
		if _, ok := out["session_id"]; !ok {
			out["session_id"] = env.SessionID
		}
	}
	if len(env.ACPMeta) > 0 {
		meta := map[string]any{}
		if m, ok := out["_meta"].(map[string]any); ok {
			for k, v := range m {
				meta[k] = v
			}
		}
		for k, v := range env.ACPMeta {
			meta[k] = v
		}
		out["_meta"] = meta
	}
	return out
}

// JSONRPCRequest is a JSON-RPC 2.0 request (or notification, without ID).
type JSONRPCRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  map[string]any  `json:"params,omitempty"`
}

// gatewayToACP maps Gateway RPC methods (spec §2) to the ACP method they
// are exported as; no other Gateway method has an ACP equivalent.
var gatewayToACP = map[string]string{
	"chat.send":      e2a.ACPSessionPrompt,
	"chat.interrupt": e2a.ACPSessionCancel,
}

// EnvelopeToACPJSONRPCCall is envelope_to_acp_jsonrpc_call of the
// specification (§8, §11.4): the envelope as a JSON-RPC call, params from
// MergeParamsToACPPrompt, keys in the spec's spelling (session_id). It does
// not change the envelope or its provenance.
//
//   - method: env.Method, with the explicit Gateway mapping of
//     Gateway methods (chat.send → session/prompt, whose params are then
//     merged as a session/prompt's: text/content/query become the prompt;
//     chat.interrupt → session/cancel, with session_id from the envelope);
//     "ext" → env.ExtMethod; any other method is passed through as is;
//   - id: env.JSONRPCID; else env.RequestID as a string; none for
//     session/cancel and for an envelope that came in as a notification.
//
// Errors: ErrMethodNotFound for an empty method (a heartbeat) or "ext"
// without ext_method; ErrInvalidRequest when a call needs an id and the
// envelope has neither jsonrpc_id nor request_id.
func EnvelopeToACPJSONRPCCall(env *e2a.Envelope) (*JSONRPCRequest, error) {
	method := env.Method
	if m, ok := gatewayToACP[method]; ok {
		method = m
	}
	switch {
	case method == "":
		return nil, &Error{Kind: ErrMethodNotFound, Protocol: ProtocolACP, Msg: "envelope has no method"}
	case method == "ext":
		if env.ExtMethod == "" {
			return nil, &Error{Kind: ErrMethodNotFound, Protocol: ProtocolACP, Method: method, Msg: "method ext without ext_method"}
		}
		method = env.ExtMethod
	}
	src := env
	if method != env.Method {
		c := *env
		c.Method = method
		src = &c
	}
	call := &JSONRPCRequest{JSONRPC: "2.0", Method: method, Params: MergeParamsToACPPrompt(src)}
	if method != env.Method && method != e2a.ACPSessionPrompt && env.SessionID != "" {
		// A mapped Gateway method (chat.interrupt → session/cancel) names
		// its session like a session/prompt does.
		_, a := call.Params["session_id"]
		_, b := call.Params["sessionId"]
		if !a && !b {
			call.Params["session_id"] = env.SessionID
		}
	}
	if len(call.Params) == 0 {
		call.Params = nil
	}
	notification := acpNotifications[method]
	if env.Provenance != nil {
		if b, _ := env.Provenance.Details[DetailNotification].(bool); b {
			notification = true
		}
	}
	if !notification {
		switch {
		case len(env.JSONRPCID) > 0:
			call.ID = append(json.RawMessage(nil), env.JSONRPCID...)
		case env.RequestID != "":
			call.ID, _ = json.Marshal(env.RequestID)
		default:
			return nil, &Error{Kind: ErrInvalidRequest, Protocol: ProtocolACP, Method: method, Msg: "a call needs jsonrpc_id or request_id"}
		}
	}
	return call, nil
}

// EnvelopeToACPPeerCall is EnvelopeToACPJSONRPCCall for a pure ACP peer: the
// same call with params in the key spelling of the ACP schema, checked
// against the ACP Go SDK's request types. On top of the spec export:
//
//   - session_id becomes sessionId (an existing sessionId wins), and
//     mime_type becomes mimeType in content blocks; a method whose schema
//     requires a sessionId (acpSessionMethods) gets env.SessionID when its
//     params name no session;
//   - for session/prompt, only the PromptRequest keys stay (sessionId,
//     prompt, messageId, _meta); the E2A prompt sources (content_blocks,
//     text, content, query) are dropped and any other business key (mode,
//     files, …) moves to _meta.e2a_params, so nothing is lost;
//   - the method must be an ACP client → agent method or an extension
//     method ("_…").
//
// Errors: those of EnvelopeToACPJSONRPCCall; ErrMethodNotFound for a
// method without an ACP equivalent (history.get …); ErrInvalidParams when
// the result is not a valid ACP request (no session id, no prompt, a
// content block missing its required fields).
func EnvelopeToACPPeerCall(env *e2a.Envelope) (*JSONRPCRequest, error) {
	call, err := EnvelopeToACPJSONRPCCall(env)
	if err != nil {
		return nil, err
	}
	if !acpMethods[call.Method] && !strings.HasPrefix(call.Method, "_") {
		return nil, &Error{Kind: ErrMethodNotFound, Protocol: ProtocolACP, Method: call.Method, Msg: "no ACP equivalent"}
	}
	fail := func(msg string) error {
		return &Error{Kind: ErrInvalidParams, Protocol: ProtocolACP, Method: call.Method, JSONRPCID: call.ID, Msg: msg}
	}
	p := call.Params
	if p == nil {
		p = map[string]any{}
	}
	out := renamedKey(p, "session_id", "sessionId")
	switch call.Method {
	case e2a.ACPSessionPrompt:
		blocks, _ := out["prompt"].([]any)
		peerBlocks := make([]any, len(blocks))
		for i, b := range blocks {
			peerBlocks[i] = camelBlock(b)
		}
		pr := map[string]any{"sessionId": out["sessionId"], "prompt": peerBlocks}
		extra := map[string]any{}
		for k, v := range out {
			switch k {
			case "sessionId", "prompt":
			case "messageId", "_meta":
				pr[k] = v
			case "content_blocks", "text", "content", "query":
			default:
				extra[k] = v
			}
		}
		if len(extra) > 0 {
			meta := map[string]any{}
			if m, ok := pr["_meta"].(map[string]any); ok {
				for k, v := range m {
					meta[k] = v
				}
			}
			meta["e2a_params"] = extra
			pr["_meta"] = meta
		}
		out = pr
		if msg := checkPeerPrompt(out); msg != "" {
			return nil, fail(msg)
		}
	default:
		if !acpSessionMethods[call.Method] {
			break
		}
		if _, has := out["sessionId"]; !has && env.SessionID != "" {
			out["sessionId"] = env.SessionID // the envelope's session, as session/prompt's
		}
		if s, _ := out["sessionId"].(string); s == "" {
			return nil, fail("sessionId is required")
		}
	}
	call.Params = out
	if len(out) == 0 {
		call.Params = nil
	}
	return call, nil
}

// renamedKey returns a copy of m with key from renamed to; when m has
// both, to keeps its value and from is dropped.
func renamedKey(m map[string]any, from, to string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	if v, ok := out[from]; ok {
		if _, has := out[to]; !has {
			out[to] = v
		}
		delete(out, from)
	}
	return out
}

// camelBlock returns a content block with the ACP schema's key spelling.
func camelBlock(b any) any {
	m, ok := b.(map[string]any)
	if !ok {
		return b
	}
	out := renamedKey(m, "mime_type", "mimeType")
	if r, ok := out["resource"].(map[string]any); ok {
		out["resource"] = camelBlock(r)
	}
	return out
}

// checkPeerPrompt validates session/prompt params with the ACP SDK types
// and the required fields of each content block variant.
func checkPeerPrompt(p map[string]any) string {
	if s, _ := p["sessionId"].(string); s == "" {
		return "sessionId is required"
	}
	blocks, _ := p["prompt"].([]any)
	if len(blocks) == 0 {
		return "prompt is required (no prompt, content_blocks, text, content or query)"
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "params do not encode: " + err.Error()
	}
	var pr acp.PromptRequest
	if err := json.Unmarshal(b, &pr); err != nil {
		return "not an ACP PromptRequest: " + typeError(err)
	}
	if err := pr.Validate(); err != nil {
		return err.Error()
	}
	for i := range pr.Prompt {
		if err := pr.Prompt[i].Validate(); err != nil {
			return err.Error()
		}
		m, _ := blocks[i].(map[string]any)
		if msg := requiredBlockFields(m); msg != "" {
			return msg
		}
	}
	return ""
}

func requiredBlockFields(m map[string]any) string {
	need := func(keys ...string) string {
		for _, k := range keys {
			if _, ok := m[k].(string); !ok {
				return "content block " + str(m, "type") + " needs string " + k
			}
		}
		return ""
	}
	switch str(m, "type") {
	case "text":
		return need("text")
	case "image", "audio":
		return need("data", "mimeType")
	case "resource_link":
		return need("uri", "name")
	case "resource":
		r := obj(m, "resource")
		if r == nil || str(r, "uri") == "" {
			return "content block resource needs resource.uri"
		}
		// TextResourceContents {uri, text} or BlobResourceContents
		// {uri, blob}: one of the two is the resource's content.
		_, text := r["text"].(string)
		_, blob := r["blob"].(string)
		if !text && !blob {
			return "content block resource needs string resource.text or resource.blob"
		}
		return ""
	}
	return "unknown content block type " + echo(str(m, "type"))
}

// IsACPMethod reports whether m is an ACP client → agent method the
// normalizer knows (extension methods, "_…", are not listed).
func IsACPMethod(m string) bool { return acpMethods[m] }
