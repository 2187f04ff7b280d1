package normalizer

import (
	"encoding/json"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// Input is one request as the front door received it: the body and the
// transport-level facts the body cannot vouch for. Only the fields below are
// read; in particular no header other than X-User-ID, traceparent and
// tracestate is ever copied (Authorization and X-Api-Key never are).
type Input struct {
	// Body is the raw request body (one JSON object; JSONL for workflows).
	// It is never modified.
	Body []byte
	// Header holds the HTTP headers (nil on stdio). Read: X-User-ID,
	// traceparent, tracestate.
	Header http.Header
	// Principal is the authenticated caller, if the front door
	// authenticated one.
	Principal *Principal
	// Channel is the ingress name (e.g. "http", "stdio"); when empty the
	// protocol name is used. A raw E2A envelope's own channel wins.
	Channel string
	// RequestID is used when the request carries none (e.g. from an
	// Idempotency-Key); when empty a UUIDv7 is generated.
	RequestID string
	// Agent is an explicit target pool (e.g. ?agent=NAME); it wins over the
	// routing rules. It is not validated here: the front door checks it
	// with ValidPool.
	Agent string
	// Now returns the current time (converted_at, default timestamps);
	// time.Now when nil. Tests set it for deterministic output.
	Now func() time.Time
	// NewID returns a fresh id (request ids, new A2A/AgentVault task and
	// context ids); UUIDv7 when nil.
	NewID func() string
	// RPC, when set, is a JSON-RPC request the front door already decoded
	// (e.g. one element of a batch); the JSON-RPC adapters (ACP, A2A,
	// AgentVault) then read it instead of Body.
	RPC *RPCRequest
}

// RPCRequest is a JSON-RPC 2.0 request decoded by the front door, with the
// envelope checks (jsonrpc "2.0", method a non-empty string) already done.
type RPCRequest struct {
	// ID is the raw id: nil when the member was absent (a notification),
	// "null" for an explicit null, else a JSON string or number.
	ID json.RawMessage
	// Method is the method name.
	Method string
	// Params is the raw params, nil when absent or null.
	Params json.RawMessage
}

// Principal is the caller the front door authenticated.
type Principal struct {
	// UserID is the authenticated identity.
	UserID string
	// IdentityOrigin is user, service, agent or system (e2a.Identity*);
	// "user" when empty.
	IdentityOrigin string
	// Scheme is how the caller authenticated (the ingress's scheme names:
	// none, apiKey, bearer, oauth2); "" when not known. ACP's authenticate
	// checks the method it names against it.
	Scheme string
	// AssertsUser marks a trusted gateway allowed to speak for end users:
	// the user id the request claims (X-User-ID, message metadata, envelope
	// user_id) is kept and the principal only fills a missing one. For any
	// other principal the authenticated UserID always wins.
	AssertsUser bool
}

// Op tells the front door what to do with a normalized request.
type Op string

const (
	// OpSubmit: new work; publish the envelope on e2a.req.<pool>.<request_id>.
	OpSubmit Op = "submit"
	// OpQuery: read state (A2A/AgentVault tasks/get); answer from the task
	// store, publish nothing. Envelope.TaskID names the task.
	OpQuery Op = "query"
	// OpCancel: cancel running work (tasks/cancel, ACP session/cancel);
	// publish on e2a.ctl.<request_id> of the request(s) of TaskID or
	// SessionID.
	OpCancel Op = "cancel"
	// OpSubscribe: stream an existing request again (tasks/resubscribe,
	// AgentVault tasks/sendSubscribe with a task id).
	OpSubscribe Op = "subscribe"
	// OpLocal: a transport-level message the front door answers itself
	// (ACP initialize/authenticate; A2E handshake, ping, pong, shutdown and
	// the response-side types).
	OpLocal Op = "local"
)

// Result is a normalized request.
type Result struct {
	// Envelope is the E2A request; secrets are already stripped.
	Envelope *e2a.Envelope
	// Pool is the agent pool chosen by the routing rule ([Routes.Pool]).
	Pool string
	// Op is what the front door does with it.
	Op Op
	// Notification is true for a JSON-RPC request without an id: the
	// front door must not answer it (it still acts on it).
	Notification bool
}

// Adapter normalizes one request of one protocol.
type Adapter func(Input) (*Result, error)

// SecretRefFunc turns a secret into a reference that may be published (a
// vault key, a ticket id). kind is "bearer_token", "extra_header:<name>",
// "a2a_push_token", "a2a_push_credentials" or "field:<key>". It returns ""
// to drop the secret, and must return value itself when value already is
// one of its references (so that normalizing an envelope twice is stable).
// It is the only way a secret leaves an adapter; it may do I/O (a vault),
// the adapters themselves never do.
type SecretRefFunc func(kind, value string) string

// Config configures a [Normalizer]. The zero value is usable: default
// routes, the base A2E type registry, secrets dropped.
type Config struct {
	// Routes chooses the pool of every envelope.
	Routes Routes
	// A2ETypes is the A2E type registry; NewRegistry() when nil.
	A2ETypes *Registry
	// SecretRef, when set, replaces stripped secrets by references;
	// otherwise they are dropped.
	SecretRef SecretRefFunc
}

// Normalizer holds the configuration shared by all adapters. It is safe for
// concurrent use; every method is a pure function of its Input.
type Normalizer struct {
	routes    Routes
	registry  *Registry
	secretRef SecretRefFunc
}

// New returns a Normalizer for cfg.
func New(cfg Config) *Normalizer {
	n := &Normalizer{routes: cfg.Routes, registry: cfg.A2ETypes, secretRef: cfg.SecretRef}
	if n.registry == nil {
		n.registry = NewRegistry()
	}
	return n
}

// A2ETypes returns the A2E type registry the A2E adapter reads (the one
// of Config.A2ETypes); the A2E handshake lists its types.
func (n *Normalizer) A2ETypes() *Registry { return n.registry }

// Protocol names accepted by [Normalizer.Adapter]. source_protocol holds
// only the specification's e2a, acp and a2a: AgentVault is written a2a,
// A2E (messages and workflows) and a legacy AgentRequest e2a, each with its
// origin in provenance.details.ingress_protocol (e2a.SpecifyProvenance).
const (
	ProtocolE2A        = e2a.SourceE2A
	ProtocolACP        = e2a.SourceACP
	ProtocolA2A        = e2a.SourceA2A
	ProtocolAgentVault = e2a.SourceAgentVault
	ProtocolA2E        = e2a.SourceA2E
	// ProtocolWorkflow names the A2E workflow adapter; its envelopes carry
	// source_protocol "a2e" and method MethodWorkflowExecute.
	ProtocolWorkflow = "a2e.workflow"
)

// Protocols lists every adapter name in a stable order.
var Protocols = []string{ProtocolE2A, ProtocolACP, ProtocolA2A, ProtocolAgentVault, ProtocolA2E, ProtocolWorkflow}

// Adapter returns the adapter of a protocol (see [Protocols]).
func (n *Normalizer) Adapter(protocol string) (Adapter, bool) {
	switch protocol {
	case ProtocolE2A:
		return n.FromE2A, true
	case ProtocolACP:
		return n.FromACP, true
	case ProtocolA2A:
		return n.FromA2A, true
	case ProtocolAgentVault:
		return n.FromAgentVault, true
	case ProtocolA2E:
		return n.FromA2E, true
	case ProtocolWorkflow:
		return n.FromWorkflow, true
	}
	return nil, false
}

// Converter ids written to provenance.converter.
const converterPrefix = "e2a-pipeline/normalizer/"

// Converter returns the provenance.converter id of an adapter.
func Converter(protocol string) string { return converterPrefix + protocol }

// Detail keys written to provenance.details. Egress renders the answer from
// source_protocol, method, is_stream, jsonrpc_id and these.
const (
	// DetailJSONRPCMethod: the JSON-RPC method as received (spec §11.3).
	DetailJSONRPCMethod = "jsonrpc_method"
	// DetailOp: the Op, so that a stored envelope says what it was.
	DetailOp = "op"
	// DetailNotification: true when a JSON-RPC request had no id (no answer).
	DetailNotification = "jsonrpc_notification"
	// DetailTaskCreated: the adapter assigned a new task_id (A2A message
	// without taskId, AgentVault tasks/send without id): the request id.
	DetailTaskCreated = "task_created"
	// DetailTaskContinued: the request continues an existing task.
	DetailTaskContinued = "task_continued"
	// DetailContextCreated: the adapter assigned a new context_id (A2A).
	DetailContextCreated = "context_created"
	// DetailInteractionSpecVersion: trpc-agent-go interaction_spec_version
	// of the A2A client; when present egress may use the extended encoding
	// (tool calls as DataParts, thought parts).
	DetailInteractionSpecVersion = "interaction_spec_version"
	// DetailWebhookURL: AgentVault tasks/send webhookUrl, its scheme and
	// host only (redact.URL: the path and query may be the webhook's
	// secret).
	DetailWebhookURL = "webhook_url"
	// DetailA2EType, DetailA2EVersion, DetailA2EModel, DetailA2EKnown: the
	// A2E message type, protocol version, registered model name
	// ("A2EMessage" for a generic message) and whether the type was
	// registered.
	DetailA2EType    = "a2e_type"
	DetailA2EVersion = "a2e_version"
	DetailA2EModel   = "a2e_model"
	DetailA2EKnown   = "a2e_known"
	// DetailA2AVersion: the A2A version of the door an A2A message came in
	// ("1.0", "0.3"; the console lists a2a/v1.0, a2a/v0.3). A v1.0 call
	// is normalized as its v0.3 equivalent (jsonrpc_method message/send
	// or message/stream), so this is what tells them apart.
	DetailA2AVersion = "a2a_version"
	// A2AVersion is DetailA2AVersion's value for the v0.3 door (FromA2A);
	// the v1.0 door sets A2AVersion1.
	A2AVersion  = "0.3"
	A2AVersion1 = "1.0"
	// DetailWorkflowFormat: "jsonl" or "rest".
	DetailWorkflowFormat = "workflow_format"
	// DetailStrippedSecrets: how many secret values were removed or replaced
	// by references (never the values).
	DetailStrippedSecrets = "stripped_secrets"
)

// req carries one adapter run's Input with the defaults applied.
type req struct {
	Input
	n        *Normalizer
	protocol string // source protocol written to provenance
	adapter  string // adapter name for Converter
	now      time.Time
	// workflowDone: the workflow string of the envelope is prepared
	// (workflowString, or FromWorkflow's own); finish leaves it alone.
	workflowDone bool
}

func (n *Normalizer) begin(in Input, protocol, adapter string) *req {
	r := &req{Input: in, n: n, protocol: protocol, adapter: adapter}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.NewID == nil {
		r.NewID = newUUID
	}
	r.now = r.Now()
	return r
}

// beginRPC is begin for a JSON-RPC adapter, with the request read from in
// (requestOf: its errors are the adapter's).
func (n *Normalizer) beginRPC(in Input, protocol, adapter string) (*req, *rpcRequest, error) {
	r := n.begin(in, protocol, adapter)
	rq, err := requestOf(in, adapter)
	return r, rq, err
}

func newUUID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// newEnvelope returns an envelope with the fields every adapter sets the
// same way; finish completes it.
func (r *req) newEnvelope(method string) *e2a.Envelope {
	return &e2a.Envelope{
		ProtocolVersion: e2a.ProtocolVersion,
		Method:          method,
		Provenance: &e2a.Provenance{
			SourceProtocol: r.protocol,
			Details:        map[string]any{},
		},
	}
}

// finish applies what is common to every adapter: defaults (protocol
// version, request id, timestamp, channel), the request-id grammar,
// provenance converter and time, trace context and identity from the
// transport, secret stripping (a workflow string of an
// a2e.workflow.execute envelope, whatever the door, rewritten without its
// secrets: workflowString), routing. claimedUsers are user ids the
// request itself claims, best first. Its errors: an id refused by the
// grammar (see checkIDs); a workflow string refused by workflowString
// (ErrInvalidParams with its lines); a submission (OpSubmit) routed to
// WorkflowPool whose method is not MethodWorkflowExecute
// (ErrInvalidRequest: the workflow worker runs params.workflow of
// anything it is given, and only that method's workflow string is
// prepared). Queries, cancels and local messages are not refused.
func (r *req) finish(env *e2a.Envelope, op Op, notification bool, claimedUsers ...string) (*Result, error) {
	if env.ProtocolVersion == "" {
		env.ProtocolVersion = e2a.ProtocolVersion
	}
	if env.RequestID == "" {
		env.RequestID = r.RequestID
	}
	if env.RequestID == "" {
		env.RequestID = r.NewID()
	}
	if env.Provenance != nil && env.TaskID == "" && env.Provenance.Details[DetailTaskCreated] == true {
		// A task the adapter creates is named by its first request: that
		// request (its envelope, its principal) stands for the task's
		// record until a second turn writes one (ingress/tasks.go).
		env.TaskID = env.RequestID
	}
	if err := r.checkIDs(env); err != nil {
		return nil, err
	}
	if env.Timestamp == "" {
		env.Timestamp = e2a.FormatTime(r.now)
	}
	if env.Channel == "" {
		env.Channel = r.Channel
	}
	if env.Channel == "" {
		env.Channel = r.protocol
	}
	if env.Provenance == nil {
		env.Provenance = &e2a.Provenance{SourceProtocol: r.protocol}
	}
	p := env.Provenance
	if p.SourceProtocol == "" {
		p.SourceProtocol = r.protocol
	}
	if p.Converter == "" {
		p.Converter = Converter(r.adapter)
		p.ConvertedAt = e2a.FormatTime(r.now)
	} else if p.ConvertedAt == "" {
		p.ConvertedAt = e2a.FormatTime(r.now)
	}
	if p.Details == nil {
		p.Details = map[string]any{}
	}
	e2a.SpecifyProvenance(p) // agentvault, a2e, agent_request → details.ingress_protocol
	// Only the ingress names a conversation's owner (after its ownership
	// check): a client's value (a raw E2A envelope's provenance) is dropped.
	delete(p.Details, e2a.DetailConversationOwner)
	p.Details[DetailOp] = string(op)
	if notification {
		p.Details[DetailNotification] = true
	}
	r.applyTrace(env)
	r.applyIdentity(env, claimedUsers)
	// A workflow string, whatever the door, loses its secrets as the A2E
	// door's does (the raw E2A door published it whole).
	if _, e := r.workflowString(env); e != nil {
		return nil, r.refusal(env, e)
	}
	addStripped(p, stripSecrets(env, r.n.secretRef))
	pool := r.Agent
	if pool == "" {
		pool = r.n.routes.Pool(env)
	}
	if op == OpSubmit && pool == WorkflowPool && env.Method != MethodWorkflowExecute {
		// The workflow worker runs params.workflow of whatever it is given:
		// another method's workflow (?agent=workflow) was never prepared.
		return nil, r.refusal(env, newErr(ErrInvalidRequest, r.adapter,
			"the workflow pool runs %s only (method %s)", MethodWorkflowExecute, echo(refusedMethod(env))))
	}
	return &Result{Envelope: env, Pool: pool, Op: op, Notification: notification}, nil
}

// addStripped adds n, a count of secret values removed, to p's
// details.stripped_secrets (a raw E2A envelope's own count, a JSON
// number, is added to when sound).
func addStripped(p *e2a.Provenance, n int) {
	if n <= 0 || p == nil {
		return
	}
	if p.Details == nil {
		p.Details = map[string]any{}
	}
	switch prev := p.Details[DetailStrippedSecrets].(type) {
	case int:
		n += prev
	case json.Number:
		if v, err := prev.Int64(); err == nil && v > 0 && v < 1<<30 {
			n += int(v)
		}
	}
	p.Details[DetailStrippedSecrets] = n
}

// refusedMethod is the method an error about env names: its ext_method
// for an "ext" call, else its method.
func refusedMethod(env *e2a.Envelope) string {
	if env.ExtMethod != "" {
		return env.ExtMethod
	}
	return env.Method
}

// refusal completes e, an error finish returns about env, with what the
// door answers with: the method, the JSON-RPC id and the A2E req_id
// (correlation_id, else message_id).
func (r *req) refusal(env *e2a.Envelope, e *Error) *Error {
	e.Method = refusedMethod(env)
	e.JSONRPCID = env.JSONRPCID
	e.ReqID = env.CorrelationID
	if e.ReqID == "" {
		e.ReqID = env.MessageID
	}
	return e
}

// checkIDs applies subjects.ValidateRequestID to the request id (from the
// body, the Input — an Idempotency-Key — or generated) and, for the
// protocols whose task, context and session ids become keys of the task
// index (A2A, AgentVault, ACP, workflows), to those ids when set; to an
// E2A task_id, context_id and session_id too, keys of the task index since
// E2A's turns of a task (a bad one was answered 503, retryable, forever),
// the session_id that of an ACP session's record, of the console's index
// and of a bridge's conversation (bridge.ConversationOf). An E2A
// correlation_id and message_id are labels, not ids: no key, no header
// (JSON-escaped in the envelope, the frames and the A2E req_id, logged as
// a structured attribute), so free text as §4 has them. A refused
// id is an ErrInvalidParams *Error that also wraps the subjects error
// (errors.Is(err, subjects.ErrInvalidID)): HTTP 400, JSON-RPC -32602, A2E
// invalid_params, never retryable.
func (r *req) checkIDs(env *e2a.Envelope) error {
	ids := [][2]string{{"request_id", env.RequestID}}
	switch r.adapter {
	case ProtocolE2A:
		// A task's context_id goes into its record, whose writes keep the
		// context's claim under the id (ingress keepContext), a key the
		// grammar bounds: one outside it would fail a later turn.
		ids = append(ids, [2]string{"task id", env.TaskID}, [2]string{"context id", env.ContextID},
			[2]string{"session id", env.SessionID})
	case ProtocolA2E:
	default:
		ids = append(ids, [2]string{"task id", env.TaskID}, [2]string{"context id", env.ContextID},
			[2]string{"session id", env.SessionID})
	}
	for _, f := range ids {
		if f[0] != "request_id" && f[1] == "" {
			continue
		}
		if err := subjects.ValidateRequestID(f[1]); err != nil {
			return r.refusal(env, idRefusal(r.adapter, f[0], f[1], err))
		}
	}
	return nil
}

// idRefusal is the ErrInvalidParams of id value (field) refused by
// subjects.ValidateRequestID with err, which it wraps as its Cause.
func idRefusal(protocol, field, value string, err error) *Error {
	e := newErr(ErrInvalidParams, protocol, "%s %s is not a valid id (1 to %d bytes of UTF-8, no leading or trailing white space, no control, format or line-separator character): %s",
		field, echo(value), subjects.MaxIDLength, detail(err))
	e.Cause = err
	return e
}

// CallerUserID is the user id the adapters give the envelope of a request
// from in that claims none in its body: the authenticated principal's
// unless it AssertsUser, then the X-User-ID header, then the principal's
// ("" for none). Calls that make no envelope but act on the caller's
// tenant data (A2A's push notification configs, found by the push stage
// under the envelopes' user_id) scope themselves with it.
func CallerUserID(in Input) string {
	p := in.Principal
	if p != nil && p.UserID != "" && !p.AssertsUser {
		return p.UserID
	}
	if in.Header != nil {
		if u := in.Header.Get("X-User-ID"); u != "" {
			return u
		}
	}
	if p != nil {
		return p.UserID
	}
	return ""
}

// applyIdentity sets user_id and identity_origin: an authenticated principal
// wins unless it AssertsUser; otherwise the X-User-ID header, then the ids
// the request claims, then the principal.
func (r *req) applyIdentity(env *e2a.Envelope, claimed []string) {
	p := r.Principal
	if p != nil && p.UserID != "" && !p.AssertsUser {
		env.UserID = p.UserID
		env.IdentityOrigin = p.IdentityOrigin
		if env.IdentityOrigin == "" {
			env.IdentityOrigin = e2a.IdentityUser
		}
		return
	}
	if env.UserID == "" && r.Header != nil {
		env.UserID = r.Header.Get("X-User-ID")
	}
	for _, u := range claimed {
		if env.UserID != "" {
			break
		}
		env.UserID = u
	}
	if env.UserID == "" && p != nil && p.UserID != "" {
		env.UserID = p.UserID
		if env.IdentityOrigin == "" {
			env.IdentityOrigin = p.IdentityOrigin
		}
	}
	if env.UserID != "" && env.IdentityOrigin == "" {
		env.IdentityOrigin = e2a.IdentityUser
	}
}

// applyTrace takes W3C trace context from the headers when traceparent is
// valid; otherwise keeps the body's (E2A) if valid, and drops anything
// invalid. tracestate is kept only with a valid traceparent. Both are
// checked by [e2a.CleanTrace], the check every stage applies.
func (r *req) applyTrace(env *e2a.Envelope) {
	if r.Header != nil {
		if tp := r.Header.Get("traceparent"); e2a.ValidTraceparent(tp) {
			env.Trace = &e2a.TraceContext{Traceparent: tp, Tracestate: e2a.CleanTracestate(r.Header.Values("tracestate")...)}
			return
		}
	}
	env.Trace = e2a.CleanTrace(env.Trace)
}

// checkUTF8 refuses a body that is not valid UTF-8 with ErrParse (JSON-RPC
// -32700, HTTP 400, A2E parse_error): encoding/json would silently replace
// the bad bytes by U+FFFD, so two different ids (or a secret and its
// mangled copy) would become one string.
func checkUTF8(body []byte, protocol string) *Error {
	if utf8.Valid(body) {
		return nil
	}
	off := 0
	for off < len(body) {
		c, size := utf8.DecodeRune(body[off:])
		if c == utf8.RuneError && size <= 1 {
			break
		}
		off += size
	}
	return newErr(ErrParse, protocol, "body is not valid UTF-8 (byte 0x%02x at offset %d)", body[off], off)
}

// checkJSONText refuses, with ErrParse, a JSON text that is not valid
// UTF-8 (checkUTF8) or nests deeper than e2a.MaxNesting.
func checkJSONText(body []byte, protocol string) *Error {
	if e := checkUTF8(body, protocol); e != nil {
		return e
	}
	if err := e2a.CheckDepth(body, e2a.MaxNesting); err != nil {
		return newErr(ErrParse, protocol, "JSON nests deeper than %d", e2a.MaxNesting)
	}
	return nil
}
