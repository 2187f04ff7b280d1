package normalizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// A2E base message types (A2E_BASE_TYPE_MAP).
const (
	A2EHandshakeReq  = "handshake/req"
	A2EHandshakeResp = "handshake/resp"
	A2EInvokeEvent   = "invoke/event"
	A2EPing          = "ping"
	A2EPong          = "pong"
	A2EShutdown      = "shutdown"
	A2EError         = "error"
)

// A2EGenericModel is the model of a message whose type is not registered.
const A2EGenericModel = "A2EMessage"

// A2EType is one entry of the A2E type registry: a type string and what
// the normalizer needs to know about it.
type A2EType struct {
	// Type is the message type string, e.g. "tool/call/req".
	Type string
	// Model names the message class (e.g. "ToolCallRequest"); recorded in
	// provenance.details a2e_model.
	Model string
	// Op is what the front door does with it: OpSubmit for requests an
	// agent pool serves (the default when empty), OpLocal for transport
	// messages the front door answers, OpCancel for a cancellation.
	Op Op
	// Required lists the fields (besides type) a message of this type must
	// carry; a message missing one is refused with ErrInvalidParams.
	Required []string
}

// Registry is the A2E type registry: the base map, extended at start-up by
// plugins with [Registry.Register]. An unregistered type is never an error:
// it is normalized as a generic message (model "A2EMessage", OpSubmit). It
// is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	types map[string]A2EType
}

// ErrDuplicateType is returned by Register for a type already registered.
var ErrDuplicateType = errors.New("normalizer: A2E type already registered")

// baseTypes is A2E_BASE_TYPE_MAP: the SCP-compatible transport messages,
// answered by the front door itself.
var baseTypes = []A2EType{
	{Type: A2EHandshakeReq, Model: "HandshakeRequest", Op: OpLocal},
	{Type: A2EHandshakeResp, Model: "HandshakeResponse", Op: OpLocal},
	{Type: A2EInvokeEvent, Model: "A2EEvent", Op: OpLocal, Required: []string{"req_id", "kind", "seq"}},
	{Type: A2EPing, Model: "Ping", Op: OpLocal},
	{Type: A2EPong, Model: "Pong", Op: OpLocal},
	{Type: A2EShutdown, Model: "Shutdown", Op: OpLocal},
	{Type: A2EError, Model: "A2EError", Op: OpLocal, Required: []string{"req_id", "code", "message"}},
}

// NewRegistry returns a registry holding the base map.
func NewRegistry() *Registry {
	r := &Registry{types: make(map[string]A2EType, len(baseTypes))}
	for _, t := range baseTypes {
		r.types[t.Type] = t
	}
	return r
}

// typeOf is the registered type typ (known), else a generic message: OpSubmit,
// but for a response (tool/call/resp, …: a type ending in "/resp") sent
// by the client, the answer of a request of the other side, which no pool
// is to run (run, it was answered "tool/call/resp/resp"): OpLocal,
// nothing to answer, as a handshake/resp.
func (r *Registry) typeOf(typ string) (t A2EType, known bool) {
	if t, known := r.Lookup(typ); known {
		return t, true
	}
	if strings.HasSuffix(typ, "/resp") {
		return A2EType{Type: typ, Model: A2EGenericModel, Op: OpLocal}, false
	}
	return A2EType{Type: typ, Model: A2EGenericModel, Op: OpSubmit}, false
}

// Register adds plugin types (e.g. {Type: "tool/call/req", Model:
// "ToolCallRequest", Required: []string{"req_id", "name"}}). A type
// already registered (base types included) is refused with
// ErrDuplicateType and nothing is added.
func (r *Registry) Register(types ...A2EType) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for _, t := range types {
		if t.Type == "" {
			return fmt.Errorf("normalizer: A2E type with an empty type string")
		}
		if _, ok := r.types[t.Type]; ok || seen[t.Type] {
			return fmt.Errorf("%w: %q", ErrDuplicateType, t.Type)
		}
		seen[t.Type] = true
	}
	for _, t := range types {
		if t.Op == "" {
			t.Op = OpSubmit
		}
		if t.Model == "" {
			t.Model = A2EGenericModel
		}
		t.Required = append([]string(nil), t.Required...)
		r.types[t.Type] = t
	}
	return nil
}

// Lookup returns the registered entry of a type.
func (r *Registry) Lookup(typ string) (A2EType, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.types[typ]
	return t, ok
}

// Types lists the registered type strings, sorted.
func (r *Registry) Types() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.types))
	for t := range r.types {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// MaxA2EType bounds an A2E message's type, in bytes: an accepted call's
// answer lines carry a type built from it ("…/resp").
const MaxA2EType = 256

// a2eBaseFields are the A2EMessage base fields; every other field goes to
// params.
var a2eBaseFields = map[string]bool{"a2e": true, "version": true, "type": true, "id": true, "ts": true}

// FromA2E normalizes one A2E message (one NDJSON line; a trailing newline
// is fine, a second message is not).
//
//   - method ← type; message_id ← id (generated when absent);
//     correlation_id ← req_id, which also stays in params (the response and
//     every invoke/event copy it);
//   - timestamp ← ts (epoch seconds → RFC 3339 UTC), now when absent;
//   - params ← every field but the base ones (a2e, version, type, id, ts);
//   - type a2e.workflow.execute (MethodWorkflowExecute): task_id ← the
//     executionId of its workflow (a2eExecutionID), as FromWorkflow sets it;
//     a workflow string (JSONL, or a JSON array of the messages, read as
//     the workflow worker reads it) becomes FromWorkflow's JSONL, its
//     secrets removed as from an array of the messages (a2eWorkflow);
//   - provenance source_protocol "a2e", details a2e_type, a2e_version (the
//     "a2e" or "version" field, "1.0" when absent), a2e_model and a2e_known;
//   - Op from the registry: base types are OpLocal; a plugin type's own Op
//     (OpSubmit by default); an unknown type is a generic message, OpSubmit,
//     never an error, but for a "…/resp" one (a response sent by the
//     client), OpLocal. is_stream for OpSubmit (results stream as
//     invoke/event before the response).
//
// Errors (Error.ReqID set to req_id, else id, either only when it passes
// the request-id grammar): ErrParse; ErrInvalidRequest (not an object,
// more than one message, type missing or not a string, a base field of
// the wrong type); ErrInvalidParams with Error.Lines (A2E
// validation_error) for a workflow string with a message that is not a
// JSON object; ErrUnsupportedOperation (A2E unsupported) for a version (a2e
// or version) whose major version is not 1 (a2eVersionSupported); ErrInvalidParams (a registered type without one of its
// required fields; a type of more than MaxA2EType bytes or outside
// subjects.ValidateRequestID's grammar, which the answer's type is built
// from: the error's Method is then its longest sound prefix, at most
// MaxA2EType bytes, never the whole value; a non-empty req_id or id refused by
// subjects.ValidateRequestID, the error then wrapping
// subjects.ErrInvalidID: an answer copies req_id, else id, into every
// line, so a client's correlation id is 1 to 1024 bytes with no control,
// format or line-separator character).
func (n *Normalizer) FromA2E(in Input) (*Result, error) {
	r := n.begin(in, e2a.SourceA2E, ProtocolA2E)
	m, e := decodeObjectBody(in.Body, ProtocolA2E, "one A2E message per call (split NDJSON lines)")
	if e != nil {
		return nil, e
	}
	id, idOK := m["id"].(string)
	reqID, _ := m["req_id"].(string)
	// The answer's req_id (req_id, else id) is what the client matches:
	// one outside the request-id grammar is refused, and never echoed.
	bad := a2eAnswerIDs(&reqID, &id)
	// So is a type outside its grammar: the answer's type is built from it.
	typ, ok := m["type"].(string)
	typeRefused := a2eTypeRefused(typ)
	answer := func(err *Error) (*Result, error) {
		err.ReqID = reqID
		if err.ReqID == "" {
			err.ReqID = id
		}
		err.Method = typ
		if typeRefused {
			err.Method = a2eTypeShown(typ)
		}
		return nil, err
	}
	fail := func(kind error, format string, a ...any) (*Result, error) {
		return answer(newErr(kind, ProtocolA2E, format, a...))
	}
	if !ok || typ == "" {
		return fail(ErrInvalidRequest, "type is required and must be a string")
	}
	if bad != nil {
		return answer(idRefusal(ProtocolA2E, bad.field, bad.value, bad.err))
	}
	if typeRefused {
		return fail(ErrInvalidParams, "type must be 1 to %d bytes of UTF-8 with no leading or trailing white space and no control, format or line-separator character", MaxA2EType)
	}
	if v, has := m["id"]; has && v != nil && !idOK {
		return fail(ErrInvalidRequest, "id must be a string")
	}
	if v, has := m["req_id"]; has && v != nil && reqID == "" {
		if _, isStr := v.(string); !isStr {
			return fail(ErrInvalidRequest, "req_id must be a string")
		}
	}
	version, why := a2eVersion(m)
	if why != "" {
		return fail(ErrInvalidRequest, "%s", why)
	}
	if !a2eVersionSupported(version) {
		// A2E is version 1.0 (a2e-message-protocol.md: "always 1.0"; a
		// minor version is a superset): a message of another major
		// version was run as a 1.0 one, whatever it meant.
		return fail(ErrUnsupportedOperation, "A2E version %s is not supported: this server speaks A2E 1.x (send \"a2e\":\"1.0\")", echo(version))
	}
	ts, err := a2eTimestamp(m["ts"])
	if err != nil {
		return fail(ErrInvalidRequest, "ts must be epoch seconds")
	}
	t, known := n.registry.typeOf(typ)
	for _, f := range t.Required {
		if v, has := m[f]; !has || v == nil {
			return fail(ErrInvalidParams, "%s requires field %s", echo(typ), f)
		}
	}
	if t.Op == OpLocal {
		// A message answered locally (ping, handshake, shutdown) submits
		// no request: the Idempotency-Key, the id of the body's one
		// request, is not its id (a malformed one refused the pings).
		r.RequestID = ""
	}
	env := r.newEnvelope(typ)
	env.MessageID = id
	if env.MessageID == "" {
		env.MessageID = strings.ReplaceAll(r.NewID(), "-", "")
	}
	env.CorrelationID = reqID
	env.Timestamp = ts
	env.IsStream = t.Op == OpSubmit
	params := make(map[string]any, len(m))
	for k, v := range m {
		if !a2eBaseFields[k] {
			params[k] = v
		}
	}
	if len(params) > 0 {
		env.Params = params
	}
	d := env.Provenance.Details
	if typ == MethodWorkflowExecute {
		if e := r.a2eWorkflow(env, params); e != nil {
			return answer(e)
		}
	}
	d[DetailA2EType] = typ
	d[DetailA2EVersion] = version
	d[DetailA2EModel] = t.Model
	d[DetailA2EKnown] = known
	return r.finish(env, t.Op, false)
}

// a2eVersion returns the version of message m: its "a2e" field, else its
// "version", e2a.ProtocolVersion when it has neither; why says what is
// wrong with one that is not a string.
func a2eVersion(m map[string]any) (version, why string) {
	for _, k := range []string{"a2e", "version"} {
		if v, has := m[k]; has && v != nil {
			s, isStr := v.(string)
			if !isStr {
				return "", k + " must be a string"
			}
			return s, ""
		}
	}
	return e2a.ProtocolVersion, ""
}

// a2eVersionSupported reports whether v, a message's A2E version, is one
// this server speaks: 1, or 1.<minor>[.…] (a minor version is a superset
// of 1.0).
func a2eVersionSupported(v string) bool {
	return v == "1" || strings.HasPrefix(v, "1.") && len(v) > 2 && v[2] >= '0' && v[2] <= '9'
}

// a2eWorkflow prepares the workflow of an a2e.workflow.execute message
// (params.workflow) and sets env's task_id to its executionId
// (a2eExecutionID of its last message: the id clients poll with, GET
// /api/v1/executions/{id}, as FromWorkflow sets it; ingress indexes it
// before the publish). A string is prepared by workflowString (read as
// the workflow worker reads it, rewritten without its secrets, refused
// with its lines when a message is no JSON object or there are too many),
// as every door's is; an array's secrets are removed by stripSecrets. Only
// the A2E door sets task_id from the executionId.
func (r *req) a2eWorkflow(env *e2a.Envelope, params map[string]any) *Error {
	var last map[string]any
	switch wf := params["workflow"].(type) {
	case []any:
		if len(wf) > 0 {
			last, _ = wf[len(wf)-1].(map[string]any)
		}
	case string:
		var e *Error
		if last, e = r.workflowString(env); e != nil {
			e.Protocol = ProtocolA2E
			return e
		}
	}
	env.TaskID = a2eExecutionID(last)
	return nil
}

// a2eExecutionID is the executionId of the last message of an
// a2e.workflow.execute's workflow (a2eWorkflow) when it is a
// beginExecution whose executionId the workflow executor takes (its
// grammar, at most MaxWorkflowIDLen characters) and a task id's
// (subjects.ValidateRequestID); "" otherwise, a workflow the executor
// refuses (beginExecution is its last message).
func a2eExecutionID(last map[string]any) string {
	id, _ := last["executionId"].(string)
	if last["type"] != WorkflowBeginExecution || !validWorkflowID(id) || subjects.ValidateRequestID(id) != nil {
		return ""
	}
	return id
}

// a2eTimestamp is an A2E ts (epoch seconds, a number or a numeric
// string) in RFC 3339 UTC; "" when ts is absent (nil).
func a2eTimestamp(v any) (string, error) {
	if v == nil {
		return "", nil
	}
	var f float64
	var err error
	switch t := v.(type) {
	case json.Number:
		f, err = t.Float64()
	case string:
		f, err = strconv.ParseFloat(strings.TrimSpace(t), 64)
	default:
		err = errors.New("not a number")
	}
	if err != nil {
		return "", err
	}
	return e2a.EpochToRFC3339(f)
}

// a2eTypeRefused reports whether typ, a message's type, is outside the
// grammar of the values an answer carries back: more than MaxA2EType
// bytes, or outside subjects.ValidateRequestID's (white space around it,
// a control, format or line-separator character). "" is not refused here
// (a missing type is its own error).
func a2eTypeRefused(typ string) bool {
	return typ != "" && (len(typ) > MaxA2EType || subjects.ValidateRequestID(typ) != nil)
}

// a2eTypeShown is what an error names of a refused type typ (its Method,
// the A2E door's capability_name): its first runes up to the first
// control, format or line-separator one, at most MaxA2EType bytes, white
// space trimmed; "" when that is not within the grammar. Never typ whole.
func a2eTypeShown(typ string) string {
	end := 0
	for i, r := range typ {
		if i+utf8.RuneLen(r) > MaxA2EType || r == utf8.RuneError || r == '\u2028' || r == '\u2029' ||
			unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			break
		}
		end = i + utf8.RuneLen(r)
	}
	shown := strings.TrimSpace(typ[:end])
	if shown == typ || subjects.ValidateRequestID(shown) != nil {
		return ""
	}
	return shown
}

// refusedID is an A2E id refused by the request-id grammar.
type refusedID struct {
	field, value string
	err          error
}

// a2eAnswerIDs applies subjects.ValidateRequestID to a message's req_id
// and id (when not empty), the ids its answer's req_id is taken from: one
// refused is cleared, so that nothing echoes it, and the first refused is
// returned (nil when none is).
func a2eAnswerIDs(reqID, id *string) *refusedID {
	var bad *refusedID
	for _, f := range []struct {
		name string
		v    *string
	}{{"req_id", reqID}, {"id", id}} {
		if *f.v == "" {
			continue
		}
		if err := subjects.ValidateRequestID(*f.v); err != nil {
			if bad == nil {
				bad = &refusedID{field: f.name, value: *f.v, err: err}
			}
			*f.v = ""
		}
	}
	return bad
}

// decodeObjectBody decodes a body that must be exactly one JSON object.
func decodeObjectBody(body []byte, protocol, trailingMsg string) (map[string]any, *Error) {
	if e := checkJSONText(body, protocol); e != nil {
		return nil, e
	}
	t := bytes.TrimSpace(body)
	if len(t) == 0 || t[0] != '{' {
		if len(t) > 0 && json.Valid(t) {
			return nil, newErr(ErrInvalidRequest, protocol, "a message must be a JSON object")
		}
		return nil, newErr(ErrParse, protocol, "body is not valid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, newErr(ErrParse, protocol, "body is not valid JSON: %v", err)
	}
	if rest := bytes.TrimSpace(t[dec.InputOffset():]); len(rest) != 0 {
		if json.Valid(rest) || rest[0] == '{' {
			return nil, newErr(ErrInvalidRequest, protocol, "%s", trailingMsg)
		}
		return nil, newErr(ErrParse, protocol, "trailing data after the JSON object")
	}
	return m, nil
}
