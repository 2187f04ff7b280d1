package workflow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// Submitter publishes a workflow envelope durably (the ingress publishes
// on e2a.req.workflow.<request_id> and returns after the PubAck). Its
// errors wrapping ErrConflict or ErrNotExecution are answered 409,
// ErrTooLarge 413, any other
// 503 with Retry-After.
type Submitter interface {
	Submit(ctx context.Context, env *e2a.Envelope) error
}

// FrameSource returns the frames a request has so far, in sequence order
// (replayed from the response stream, so any replica can answer, after
// restarts). It returns no frames and no error for an unknown request.
type FrameSource interface {
	Frames(ctx context.Context, requestID string) ([]*e2a.Response, error)
}

// QueuedSource is optionally implemented by a FrameSource that can read a
// request before any frame of it was written: an execution accepted (the
// execute's 202) that no workflow worker has picked up yet, which
// /api/v1/executions/{id} answers running, not 404 (a client trusting a
// 404 would submit the workflow again). Queued returns nil and no error
// for an unknown request.
type QueuedSource interface {
	Queued(ctx context.Context, requestID string) (*e2a.Envelope, error)
}

// FinalWaiter is optionally implemented by a FrameSource that can wait for
// a request's final frame without polling.
type FinalWaiter interface {
	WaitFinal(ctx context.Context, requestID string) (*e2a.Response, error)
}

// RateLimitStatus is the answer of /api/v1/rate-limit/status: the
// specification's agent_id, limits, usage and remaining, and, beyond it,
// when each window resets (Unix seconds, keyed as limits) and whether the
// figures are one replica's own because the shared state is unavailable.
type RateLimitStatus struct {
	AgentID   string           `json:"agent_id"`
	Limits    map[string]int64 `json:"limits"`
	Usage     map[string]int64 `json:"usage"`
	Remaining map[string]int64 `json:"remaining"`
	Reset     map[string]int64 `json:"reset"`
	Degraded  bool             `json:"degraded,omitempty"`
}

// RateLimits reports a principal's rate-limit state (the ingress's
// limiter, shared across replicas).
type RateLimits interface {
	Status(ctx context.Context, principal string) (*RateLimitStatus, error)
}

// TaskLookup maps a task id to the request ids that carry it, oldest
// first. The normalizer puts a workflow's executionId in task_id, so
// /api/v1/executions/{id} also answers for an executionId (the newest
// execution of the caller carrying it).
type TaskLookup interface {
	RequestIDs(ctx context.Context, taskID string) ([]string, error)
}

// Principal is the authenticated caller of a REST request.
type Principal struct {
	ID     string
	Origin string // e2a.Identity*; "agent" when empty
	// Roles and Open are the principal's standing under the ownership
	// rule (package tenant): executions are read only by their owner, by
	// audit/admin roles, or by anyone when authentication is off.
	Roles []tenant.Role
	Open  bool
}

// Tenant returns the principal as the ownership rule sees it.
func (p Principal) Tenant() tenant.Principal {
	return tenant.Principal{ID: p.ID, Roles: p.Roles, Open: p.Open}
}

// ErrUnauthenticated is returned by an API.Authenticate that finds no
// valid credential; the API answers 401.
var ErrUnauthenticated = errors.New("workflow: unauthenticated")

// ErrForbidden is returned by an API.Authenticate whose caller presented a
// valid credential that may not be used (a disabled principal, a token
// without the required scope); the API answers 403.
var ErrForbidden = errors.New("workflow: forbidden")

// ErrThrottled is returned by an API.Authenticate that refused the
// caller's credential unchecked: its address sent too many that did not
// verify (ingress's failure limiter). The API answers 429 with the
// Retry-After its Challenge sets, and no challenge.
var ErrThrottled = errors.New("workflow: too many failed authentications")

// ErrConflict is returned by a Submitter when the execution's request id
// (an Idempotency-Key) is already taken by another principal; the API
// answers 409 and reveals nothing of the other execution.
var ErrConflict = errors.New("workflow: id already in use by another principal")

// NotExecutionMessage is the refusal of an execution whose executionId
// names a task of the caller that is not a workflow execution (an A2A
// task, an E2A task_id): ErrNotExecution.
const NotExecutionMessage = "executionId names a task that is not a workflow execution"

// ErrNotExecution is returned by a Submitter (and by an ExecutionIndex)
// when the execution's executionId names a task of the caller that is not
// a workflow execution: it is not published (it would be that task's next
// turn). The API answers 409, NotExecutionMessage, not retryable.
var ErrNotExecution = errors.New("workflow: " + NotExecutionMessage)

// ErrTooLarge is returned by a Submitter when the execution's envelope is
// larger than the message broker accepts; the API answers 413, not
// retryable.
var ErrTooLarge = errors.New("workflow: execution too large to be queued")

// ErrInvalidRequest is returned by an API.NewEnvelope that refuses the
// request itself (e.g. an Idempotency-Key outside the request-id grammar);
// the API answers 400 ValidationError with the error's message as a
// client reads it (egress.ClientMessage, without "workflow: "), not
// retryable.
var ErrInvalidRequest = errors.New("workflow: invalid request")

// API serves the A2E workflow REST API (spec §12) for the ingress to
// mount: GET /health, GET /api/v1/capabilities, POST
// /api/v1/workflows/validate, POST /api/v1/workflows/execute, GET
// /api/v1/executions/{id} and GET /api/v1/rate-limit/status.
type API struct {
	// Executor validates and describes capabilities (required).
	Executor *Executor
	// Submitter publishes executions (required for execute).
	Submitter Submitter
	// Frames answers executions and the wait of execute (required for
	// those two).
	Frames FrameSource
	// Tasks resolves an executionId to request ids (optional).
	Tasks TaskLookup
	// RateLimits answers rate-limit/status; nil answers 501.
	RateLimits RateLimits
	// Limit applies the per-agent request limits (spec §9) after
	// authentication on every endpoint but /health and
	// /api/v1/rate-limit/status (reading the state costs nothing). It
	// answers a refusal itself (429 with the specification's body and
	// Retry-After, or 503) and returns false. nil: no limit.
	Limit func(w http.ResponseWriter, r *http.Request, p Principal) bool
	// Authenticate returns the caller; nil treats every caller as
	// [Anonymous]. An error wrapping ErrUnauthenticated answers 401,
	// ErrForbidden 403, any other 500. /health needs no authentication.
	Authenticate func(r *http.Request) (Principal, error)
	// Challenge sets the WWW-Authenticate challenges of a refusal by
	// Authenticate (err, wrapping ErrUnauthenticated or ErrForbidden) on
	// h; nil sets `Bearer realm="a2e"` on a 401.
	Challenge func(h http.Header, err error)
	// NewEnvelope builds the envelope of an execution (e.g. with the
	// normalizer); nil uses [NewEnvelope]. An error wrapping
	// ErrInvalidRequest is answered 400, any other 500.
	NewEnvelope func(r *http.Request, p Principal, workflow string) (*e2a.Envelope, error)
	// Wait bounds how long execute waits for the result before answering
	// 202 with the execution id (default: the caller's maxExecutionTime,
	// its policy's or the global one, + 5 s).
	Wait time.Duration
	// PollInterval is the first poll period when Frames is not a
	// FinalWaiter (default 20 ms, doubling up to 500 ms).
	PollInterval time.Duration
	// MaxBodyBytes bounds request bodies (default MaxWorkflowBytes + 64 KiB).
	MaxBodyBytes int64
	// Service is the service name of /health ("a2e-server").
	Service string
}

// Register mounts the handlers on mux.
func (a *API) Register(mux *http.ServeMux) {
	for _, rt := range a.Routes() {
		mux.Handle(rt.Method+" "+rt.Path, rt.Handler)
	}
}

// limited applies API.Limit before h.
func (a *API) limited(h func(http.ResponseWriter, *http.Request, Principal)) func(http.ResponseWriter, *http.Request, Principal) {
	return func(w http.ResponseWriter, r *http.Request, p Principal) {
		if a.Limit != nil && !a.Limit(w, r, p) {
			return
		}
		h(w, r, p)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// crossSiteBody reports whether a Content-Type's media type mt is one a
// browser posts cross-site without a CORS preflight: none, a form,
// multipart or text/plain ("" too for a Content-Type that does not
// parse). The gate of ingress's other doors refuses the same bodies
// (its requestRefusal); this API checks for itself, mountable without it.
func crossSiteBody(mt string) bool {
	switch mt {
	case "", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data":
		return true // "": none, or one that does not parse
	}
	return false
}

func writeError(w http.ResponseWriter, code int, e *Error) {
	writeJSON(w, code, e.Body())
}

type principalKey struct{}

func (a *API) auth(h func(http.ResponseWriter, *http.Request, Principal)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := Principal{ID: Anonymous, Origin: e2a.IdentityAgent, Open: true}
		if a.Authenticate != nil {
			var err error
			p, err = a.Authenticate(r)
			if errors.Is(err, ErrUnauthenticated) || errors.Is(err, ErrForbidden) || errors.Is(err, ErrThrottled) {
				host.CloseUnread(w.Header(), r) // the body unread
				a.refuse(w, err)
				return
			}
			if err != nil {
				writeError(w, http.StatusInternalServerError, &Error{Type: ExecutionError, Message: "authentication failed"})
				return
			}
			if p.ID == "" {
				p.ID = Anonymous
			}
			if p.Origin == "" {
				p.Origin = e2a.IdentityAgent
			}
		}
		h(w, r, p)
	}
}

// refuse answers a refusal by Authenticate: 429 for ErrThrottled (its
// Retry-After set by Challenge), 403 for ErrForbidden, else 401, with the
// challenges (Challenge).
func (a *API) refuse(w http.ResponseWriter, err error) {
	switch {
	case a.Challenge != nil:
		a.Challenge(w.Header(), err)
	case !errors.Is(err, ErrForbidden):
		w.Header().Set("WWW-Authenticate", `Bearer realm="a2e"`)
	}
	switch {
	case errors.Is(err, ErrThrottled):
		w.Header().Del("WWW-Authenticate")
		writeError(w, http.StatusTooManyRequests, &Error{Type: PermissionError, Retryable: true,
			Message: "too many failed authentications from this address: retry after the Retry-After seconds"})
		return
	case errors.Is(err, ErrForbidden):
		writeError(w, http.StatusForbidden, &Error{Type: PermissionError, Message: "forbidden: the credential may not be used"})
		return
	}
	writeError(w, http.StatusUnauthorized, &Error{Type: PermissionError, Message: "authentication required"})
}

func (a *API) health(w http.ResponseWriter, _ *http.Request) {
	s := a.Service
	if s == "" {
		s = "a2e-server"
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "healthy", "service": s})
}

// Capabilities is the capabilities object of /api/v1/capabilities.
type Capabilities struct {
	AvailableAPIs        []APIInfo        `json:"availableApis"`
	AvailableCredentials []CredentialInfo `json:"availableCredentials"`
	SupportedOperations  []string         `json:"supportedOperations"`
	KnowledgeBases       []KnowledgeBase  `json:"knowledgeBases"`
	SecurityConstraints  map[string]any   `json:"securityConstraints"`
}

// APIInfo describes an API a principal may call.
type APIInfo struct {
	ID          string           `json:"id"`
	Description string           `json:"description,omitempty"`
	BaseURL     string           `json:"baseUrl,omitempty"`
	Hosts       []string         `json:"hosts"`
	Methods     []string         `json:"methods"`
	Paths       []string         `json:"paths,omitempty"`
	Endpoints   []map[string]any `json:"endpoints,omitempty"`
}

// Capabilities returns what principal may use.
func (e *Executor) Capabilities(principal string) Capabilities {
	c := Capabilities{AvailableAPIs: []APIInfo{}, KnowledgeBases: []KnowledgeBase{}}
	pol := e.policy()
	for _, r := range pol.apisFor(principal) {
		m := r.Methods
		if len(m) == 0 {
			m = Methods
		}
		c.AvailableAPIs = append(c.AvailableAPIs, APIInfo{ID: r.ID, Description: r.Description, BaseURL: r.BaseURL, Hosts: r.Hosts, Methods: m, Paths: r.Paths, Endpoints: r.Endpoints})
	}
	c.AvailableCredentials = e.opts.Vault.List(principal)
	for _, op := range Catalog {
		if pol.allowedOperation(principal, op) && (op != OpStoreData || len(e.storageKinds()) > 0) {
			c.SupportedOperations = append(c.SupportedOperations, op)
		}
	}
	if pol.KnowledgeBases != nil {
		c.KnowledgeBases = pol.KnowledgeBases
	}
	maxOps, maxT := e.limits.MaxOperations, pol.maxExecutionTime(principal, e.limits)
	if pp, ok := pol.principal(principal); ok && pp.MaxOperations > 0 {
		maxOps = pp.MaxOperations
	}
	c.SecurityConstraints = map[string]any{
		"maxExecutionTime": maxT.Milliseconds(), "maxOperations": maxOps,
		"maxResponseBytes": e.limits.MaxResponseBytes, "maxLoopIterations": e.limits.MaxLoopIterations,
		"storage": e.storageKinds(), "operators": Operators, "transforms": Transforms, "mergeStrategies": MergeStrategies,
		"maxSteps": e.limits.MaxSteps, "maxNesting": e.limits.MaxNesting, "maxStoreBytes": e.limits.MaxStoreBytes,
		"maxDataBytes": e.limits.MaxDataBytes,
	}
	if e.limits.LocalQuota > 0 {
		c.SecurityConstraints["localStorageQuotaBytes"] = e.limits.LocalQuota
	}
	if e.limits.SessionQuota > 0 {
		c.SecurityConstraints["sessionStorageQuotaBytes"] = e.limits.SessionQuota
	}
	if wl, ok := e.limiter.(*WindowLimiter); ok { // a limiter whose limits are known
		c.SecurityConstraints["apiCallsPerMinute"], c.SecurityConstraints["apiCallsPerHour"] = wl.PerMinute, wl.PerHour
	}
	return c
}

func (a *API) capabilities(w http.ResponseWriter, _ *http.Request, p Principal) {
	writeJSON(w, http.StatusOK, map[string]any{"agent_id": p.ID, "capabilities": a.Executor.Capabilities(p.ID)})
}

// readWorkflow reads {"workflow": "..."} (or a raw JSONL body sent as
// application/jsonl, application/x-ndjson or text/plain). A body a browser
// can post cross-site without a CORS preflight (text/plain, a form, no
// Content-Type: crossSiteBody) is refused 415 when a browser sent it (an
// Origin header), as at every other door: a page must not run workflows
// through its visitor's browser. A body with a content coding is refused
// 415 too (egress.ContentCoding), as at every other door.
func (a *API) readWorkflow(w http.ResponseWriter, r *http.Request) (string, bool) {
	if ce := egress.ContentCoding(r); ce != "" {
		w.Header().Set("Accept-Encoding", "identity")
		writeError(w, http.StatusUnsupportedMediaType, &Error{Type: ValidationError,
			Message: fmt.Sprintf("Content-Encoding %q is not supported: send the body without a content coding", ce)})
		return "", false
	}
	ct := r.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if r.Header.Get("Origin") != "" && crossSiteBody(mt) {
		writeError(w, http.StatusUnsupportedMediaType, &Error{Type: ValidationError,
			Message: fmt.Sprintf("Content-Type %q is not accepted from a browser: send the body as application/json", ct)})
		return "", false
	}
	max := a.MaxBodyBytes
	if max == 0 {
		max = MaxWorkflowBytes + 64<<10
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, &Error{Type: ValidationError, Message: fmt.Sprintf("the body is larger than %d bytes", max)})
			return "", false
		}
		writeError(w, http.StatusBadRequest, &Error{Type: ValidationError, Message: "the body could not be read"})
		return "", false
	}
	if !utf8.Valid(body) {
		// encoding/json would replace the bad bytes with U+FFFD.
		writeError(w, http.StatusBadRequest, &Error{Type: ValidationError, Message: "the body is not valid UTF-8"})
		return "", false
	}
	switch mt {
	case "application/jsonl", "application/x-ndjson", "application/x-jsonlines", "text/plain":
		return string(body), true
	}
	if err := e2a.CheckDepth(body, e2a.MaxNesting); err != nil {
		writeError(w, http.StatusBadRequest, &Error{Type: ValidationError, Message: "the body nests too deeply"})
		return "", false
	}
	var req struct {
		Workflow json.RawMessage `json:"workflow"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Workflow) == 0 || string(req.Workflow) == "null" {
		writeError(w, http.StatusBadRequest, &Error{Type: ValidationError, Message: `the body must be {"workflow": "<JSONL text>"}`,
			Suggestions: []string{"Put the JSONL workflow, one message a line, in the workflow string"}})
		return "", false
	}
	var s string
	if json.Unmarshal(req.Workflow, &s) == nil {
		return s, true
	}
	var msgs []json.RawMessage
	if json.Unmarshal(req.Workflow, &msgs) == nil {
		var b strings.Builder
		for _, m := range msgs {
			b.Write(m)
			b.WriteByte('\n')
		}
		return b.String(), true
	}
	writeError(w, http.StatusBadRequest, &Error{Type: ValidationError, Message: "workflow must be a string of JSONL or an array of messages"})
	return "", false
}

func (a *API) validate(w http.ResponseWriter, r *http.Request, p Principal) {
	text, ok := a.readWorkflow(w, r)
	if !ok {
		return
	}
	_, res := a.Executor.Validate(p.ID, text)
	if oversize := len(text) > MaxWorkflowBytes; res.Valid || oversize {
		// Its size as execute measures it (prepare): the text an
		// execution publishes, which the worker measures, may be longer
		// (a final newline, U+2028 written \u2028) or shorter (blank
		// lines) than the text sent.
		if pub, ok := a.publishedText(r, p, text); ok && (oversize || len(pub) > MaxWorkflowBytes) {
			_, res = a.Executor.Validate(p.ID, pub)
		}
	}
	writeJSON(w, http.StatusOK, res)
}

// publishedText is the workflow text an execution of text would publish
// (WorkflowText of the envelope NewEnvelope builds); false when no
// envelope is built.
func (a *API) publishedText(r *http.Request, p Principal, text string) (string, bool) {
	build := a.NewEnvelope
	if build == nil {
		build = NewEnvelope
	}
	env, err := build(r, p, text)
	if err != nil {
		return "", false
	}
	pub, err := WorkflowText(env)
	return pub, err == nil
}

// NewEnvelope builds the envelope of a REST execution: a fresh UUIDv7
// request id (or one derived from the principal and an Idempotency-Key
// header, so a retried POST is one execution), method a2e.workflow.execute,
// params {"workflow": text}, the principal as user_id, the W3C trace
// context of the headers as the normalizer keeps it ([e2a.CleanTrace]). No
// credential of the HTTP request is copied.
func NewEnvelope(r *http.Request, p Principal, workflow string) (*e2a.Envelope, error) {
	id := ""
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		h := sha256.Sum256([]byte(p.ID + "\x00" + k))
		id = "wf-" + hex.EncodeToString(h[:16])
	} else {
		u, err := uuid.NewV7()
		if err != nil {
			return nil, err
		}
		id = u.String()
	}
	now := e2a.Now()
	env := &e2a.Envelope{
		ProtocolVersion: e2a.ProtocolVersion, RequestID: id, Method: Method, Channel: "http", Timestamp: now,
		IdentityOrigin: p.Origin, UserID: p.ID, Params: map[string]any{ParamWorkflow: workflow},
		Provenance: &e2a.Provenance{SourceProtocol: e2a.SourceE2A, Converter: "workflow.api", ConvertedAt: now,
			Details: map[string]any{e2a.DetailIngressProtocol: e2a.SourceA2E}},
	}
	env.Trace = e2a.CleanTrace(&e2a.TraceContext{Traceparent: r.Header.Get("traceparent"),
		Tracestate: e2a.CleanTracestate(r.Header.Values("tracestate")...)})
	return env, nil
}

func statusFor(e *Error) int {
	switch e.Type {
	case PermissionError:
		return http.StatusForbidden
	case ValidationError:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// prepare validates the workflow text of an execution and builds its
// envelope; false when it answered a refusal. The size is held against
// MaxWorkflowBytes on the text the worker measures, the envelope's
// workflow (WorkflowText: the normalizer's canonical JSONL, a newline
// after each line, U+2028 written \u2028), not on the text sent: refused
// here, nothing published, exactly when the worker would refuse it, in
// the worker's words. A text sent over the limit that fits once
// published (blank lines, white space) is validated as published.
func (a *API) prepare(w http.ResponseWriter, r *http.Request, p Principal, text string) (*e2a.Envelope, bool) {
	invalid := func(res ValidationResult) (*e2a.Envelope, bool) {
		we := validationError(res)
		writeError(w, statusFor(we), we)
		return nil, false
	}
	wf, res := a.Executor.Validate(p.ID, text)
	oversize := len(text) > MaxWorkflowBytes // (res is its too_large)
	if !res.Valid && !oversize {
		return invalid(res)
	}
	build := a.NewEnvelope
	if build == nil {
		build = NewEnvelope
	}
	env, err := build(r, p, text)
	switch {
	case err != nil && oversize:
		return invalid(res)
	case errors.Is(err, ErrInvalidRequest):
		// What a client reads of it: no "workflow: " or "normalizer
		// workflow: " prefix (egress.ClientMessage); logs keep err.Error().
		writeError(w, http.StatusBadRequest, &Error{Type: ValidationError, Message: strings.TrimPrefix(egress.ClientMessage(err), "workflow: ")})
		return nil, false
	case err != nil:
		writeError(w, http.StatusInternalServerError, &Error{Type: ExecutionError, Message: "the execution could not be prepared"})
		return nil, false
	}
	if pub, err := WorkflowText(env); err != nil || oversize || len(pub) > MaxWorkflowBytes {
		if err == nil {
			wf, res = a.Executor.Validate(p.ID, pub) // the worker's validation
		}
		if !res.Valid {
			return invalid(res)
		}
	}
	if env.TaskID == "" {
		env.TaskID = wf.ExecutionID
	}
	return env, true
}

func (a *API) execute(w http.ResponseWriter, r *http.Request, p Principal) {
	if a.Submitter == nil || a.Frames == nil {
		writeError(w, http.StatusNotImplemented, &Error{Type: ExecutionError, Message: "execution is not configured on this server"})
		return
	}
	text, ok := a.readWorkflow(w, r)
	if !ok {
		return
	}
	env, ok := a.prepare(w, r, p, text)
	if !ok {
		return
	}
	if err := a.Submitter.Submit(r.Context(), env); err != nil {
		if errors.Is(err, ErrNotExecution) {
			writeError(w, http.StatusConflict, &Error{Type: ValidationError, Message: NotExecutionMessage})
			return
		}
		if errors.Is(err, ErrConflict) {
			writeError(w, http.StatusConflict, &Error{Type: ValidationError, Message: "the Idempotency-Key is already in use; choose another"})
			return
		}
		if errors.Is(err, ErrTooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, &Error{Type: ValidationError, Message: "the workflow's execution is larger than the message broker accepts (max_payload); make it smaller"})
			return
		}
		w.Header().Set("Retry-After", "1")
		we := &Error{Type: ExecutionError, Message: "the execution could not be queued; retry later", Retryable: true}
		writeError(w, http.StatusServiceUnavailable, we)
		return
	}
	wait := a.Wait
	if wait == 0 {
		// the caller's own limit: a shorter one is answered (its
		// TimeoutError, or 202 when the pool has not started it) without
		// waiting the global one, a longer one is not cut short
		wait = a.Executor.policy().maxExecutionTime(p.ID, a.Executor.limits) + 5*time.Second
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	final, _ := a.waitFinal(ctx, env.RequestID)
	if final == nil {
		// Queued durably, it runs whatever the wait read: answered as
		// running, with where to read it (a frame read that failed was
		// once a 503 without the ids, and the client, told to retry,
		// submitted the workflow again: its ApiCalls ran twice).
		execID := a.answerID(r.Context(), env.TaskID, env.RequestID)
		w.Header().Set("Location", "/api/v1/executions/"+url.PathEscape(execID))
		writeJSON(w, http.StatusAccepted, map[string]any{"execution_id": execID, "request_id": env.RequestID, "status": StatusRunning})
		return
	}
	if we := refusal(final); we != nil {
		// The executor that runs it refused the workflow before running
		// it (checks this server leaves to it: Options.ValidateOnly):
		// answered as this server's own refusal.
		writeError(w, statusFor(we), we)
		return
	}
	st := statusFromFrames([]*e2a.Response{final})
	if st.DurationMs == 0 && final.Sequence > 0 {
		// Ended by the runtime (a cancel, a deadline, an interrupted
		// worker), not the executor: its final frame gives no duration.
		// Read from every frame, as GET /api/v1/executions/{id} does.
		if frames, err := a.Frames.Frames(r.Context(), env.RequestID); err == nil && len(frames) > 0 {
			st = statusFromFrames(frames)
		}
	}
	st.ExecutionID = a.answerID(r.Context(), env.TaskID, env.RequestID)
	body := map[string]any{"execution_id": st.ExecutionID, "request_id": env.RequestID, "status": st.Status, "results": st.Results, "duration_ms": st.DurationMs}
	if st.WorkflowExecutionID != "" {
		body["workflow_execution_id"] = st.WorkflowExecutionID
	}
	if st.Error != nil {
		body["error"] = st.Error
	}
	writeJSON(w, http.StatusOK, body)
}

// refusal is the error of a final frame by which the executor refused the
// workflow before running any of it (Executor.Serve's failure with
// details.validation: an invalid workflow, an operation, API or credential
// the principal may not use); nil for any other frame.
func refusal(final *e2a.Response) *Error {
	if final.ResponseKind != e2a.KindError {
		return nil
	}
	var b struct {
		Details struct {
			Error      *Error          `json:"error"`
			Validation json.RawMessage `json:"validation"`
		} `json:"details"`
	}
	if json.Unmarshal(final.Body, &b) != nil || b.Details.Error == nil || len(b.Details.Validation) == 0 || string(b.Details.Validation) == "null" {
		return nil
	}
	if t := b.Details.Error.Type; t != ValidationError && t != PermissionError {
		return nil
	}
	return b.Details.Error
}

// answerID is the execution_id of an execute answer: the workflow's
// executionId, as in the specification's example, when GET
// /api/v1/executions/{executionId} resolves to this execution (the task
// index lists its request id: the executionId is the caller's); else the
// request id (an executionId another principal used first stays theirs).
// The request id is always resolvable and is answered as request_id. An
// executionId that is also another request's id (an Idempotency-Key
// reused as it) resolves to that request first (execution), so it is not
// answered: it named an older execution.
func (a *API) answerID(ctx context.Context, executionID, requestID string) string {
	if executionID == "" || a.Tasks == nil {
		return requestID
	}
	ids, err := a.Tasks.RequestIDs(ctx, executionID)
	if err != nil || len(ids) == 0 || ids[len(ids)-1] != requestID {
		return requestID
	}
	if executionID != requestID && a.Frames != nil {
		if fr, err := a.Frames.Frames(ctx, executionID); err != nil || len(fr) > 0 {
			return requestID
		}
	}
	return executionID
}

// waitFinal waits for request id's final frame until ctx ends (nil and
// ctx's error then).
func (a *API) waitFinal(ctx context.Context, id string) (*e2a.Response, error) {
	if fw, ok := a.Frames.(FinalWaiter); ok {
		return fw.WaitFinal(ctx, id)
	}
	d := a.PollInterval
	if d == 0 {
		d = 20 * time.Millisecond
	}
	for {
		// A read that fails is tried again at the next poll, until ctx
		// ends: the execution is queued and runs regardless.
		frames, _ := a.Frames.Frames(ctx, id)
		if n := len(frames); n > 0 && frames[n-1].IsFinal {
			return frames[n-1], nil
		}
		if err := sleepctx.Sleep(ctx, d); err != nil {
			return nil, err
		}
		if d *= 2; d > 500*time.Millisecond {
			d = 500 * time.Millisecond
		}
	}
}

// ExecutionStatus is the answer of /api/v1/executions/{id}, rebuilt from
// the request's frames.
type ExecutionStatus struct {
	// ExecutionID is the id the execution was asked by (its executionId or
	// its request id); RequestID the pipeline's request id.
	ExecutionID         string            `json:"execution_id"`
	RequestID           string            `json:"request_id,omitempty"`
	WorkflowExecutionID string            `json:"workflow_execution_id,omitempty"`
	Status              string            `json:"status"`
	Results             map[string]any    `json:"results"`
	Error               json.RawMessage   `json:"error,omitempty"`
	StartedAt           string            `json:"started_at,omitempty"`
	CompletedAt         string            `json:"completed_at,omitempty"`
	DurationMs          int64             `json:"duration_ms"`
	Operations          []OperationStatus `json:"operations"`
}

// OperationStatus is one operation run of an execution: pending (listed
// in operationOrder, not started yet), running, then success or failed.
// An ended execution lists the runs that started: one its end cut (a
// worker killed, a cancel) is failed, its error saying so, and for an
// ApiCall or a StoreData that it may have acted.
type OperationStatus struct {
	OperationID string          `json:"operationId"`
	Type        string          `json:"type"`
	Status      string          `json:"status"`
	DurationMs  int64           `json:"duration_ms"`
	Cached      bool            `json:"cached,omitempty"`
	Error       json.RawMessage `json:"error,omitempty"`
}

// StatusFromFrames rebuilds an execution's status from its frames.
func StatusFromFrames(frames []*e2a.Response) *ExecutionStatus { return statusFromFrames(frames) }

func statusFromFrames(frames []*e2a.Response) *ExecutionStatus {
	st := &ExecutionStatus{Status: StatusRunning, Results: map[string]any{}, Operations: []OperationStatus{}}
	if len(frames) == 0 {
		return st
	}
	st.ExecutionID = frames[0].RequestID
	st.StartedAt = frames[0].Timestamp
	ops := &opTracker{byCall: map[string]int{}}
	for _, f := range frames {
		switch f.ResponseKind {
		case e2a.KindChunk:
			ops.chunk(st, f.Body)
		case e2a.KindComplete:
			var c struct {
				Result *Outcome `json:"result"`
			}
			st.Status, st.CompletedAt = StatusSuccess, f.Timestamp
			if json.Unmarshal(f.Body, &c) == nil && c.Result != nil {
				if c.Result.Results != nil {
					st.Results = normalize(c.Result.Results).(map[string]any)
				}
				st.DurationMs = c.Result.DurationMs
				st.WorkflowExecutionID = c.Result.WorkflowExecutionID
				if c.Result.Status != "" {
					st.Status = c.Result.Status
				}
			}
		case e2a.KindError:
			st.Status, st.CompletedAt = StatusFailed, f.Timestamp
			var b struct {
				Code      string `json:"code"`
				Message   string `json:"message"`
				Retryable bool   `json:"retryable"`
				Details   struct {
					Error               json.RawMessage `json:"error"`
					Results             map[string]any  `json:"results"`
					DurationMs          int64           `json:"duration_ms"`
					WorkflowExecutionID string          `json:"workflow_execution_id"`
				} `json:"details"`
			}
			_ = json.Unmarshal(f.Body, &b)
			if len(b.Details.Error) > 0 {
				st.Error = withRetryable(b.Details.Error, b.Retryable)
			} else {
				// written by the runtime: cancelled, agent_interrupted, deadline…
				typ := ExecutionError
				if b.Code == e2a.ErrCodeDeadlineExceeded {
					typ = TimeoutError
				}
				st.Error = marshal(&Error{Type: typ, Message: b.Message, Details: map[string]any{"code": b.Code}, Retryable: b.Retryable})
			}
			if b.Details.Results != nil {
				st.Results = normalize(b.Details.Results).(map[string]any)
			}
			st.DurationMs = b.Details.DurationMs
			if b.Details.WorkflowExecutionID != "" {
				// (an error the runtime wrote has none: the plan's stays)
				st.WorkflowExecutionID = b.Details.WorkflowExecutionID
			}
		}
	}
	st.Operations = ops.list(st.CompletedAt != "")
	if st.DurationMs == 0 && st.CompletedAt != "" {
		t0, e1 := e2a.ParseTime(st.StartedAt)
		t1, e2 := e2a.ParseTime(st.CompletedAt)
		if e1 == nil && e2 == nil {
			st.DurationMs = t1.Sub(t0).Milliseconds()
		}
	}
	return st
}

// opTracker follows an execution's operations through its chunks: the
// plan (Executor.Serve's first frame: operationOrder, pending), then each
// run's function_call (running) and function_response (ended), matched by
// the call's id.
type opTracker struct {
	ops    []OperationStatus
	byCall map[string]int // function_call id → index in ops
}

// chunk reads one e2a.chunk frame's body into st and the operations.
func (t *opTracker) chunk(st *ExecutionStatus, body json.RawMessage) {
	var c struct {
		DeltaKind string `json:"delta_kind"`
		Delta     struct {
			Kind string        `json:"kind"` // custom
			Data executionPlan `json:"data"`
			Type string        `json:"type"` // tool
			ID   string        `json:"id"`
			Name string        `json:"name"`
			Args struct {
				OperationID string `json:"operationId"`
				Parent      string `json:"parent"`
			} `json:"args"`
			Response operationResult `json:"response"`
		} `json:"delta"`
	}
	if json.Unmarshal(body, &c) != nil {
		return
	}
	d := c.Delta
	switch {
	case c.DeltaKind == e2a.DeltaCustom && d.Kind == "status" && d.Data.Event == EventExecution:
		st.WorkflowExecutionID = d.Data.WorkflowExecutionID
		t.ops = append(t.ops, d.Data.Operations...)
	case c.DeltaKind != e2a.DeltaTool:
	case d.Type == e2a.ToolFunctionCall:
		t.started(d.ID, d.Name, d.Args.OperationID, d.Args.Parent)
	case d.Type == e2a.ToolFunctionResponse:
		rs := d.Response
		run := OperationStatus{OperationID: rs.OperationID, Type: d.Name, Status: rs.Status, DurationMs: rs.DurationMs, Cached: rs.Cached, Error: rs.Error}
		if i, ok := t.byCall[d.ID]; ok {
			t.ops[i] = run
		} else {
			t.ops = append(t.ops, run)
		}
		if len(rs.Result) > 0 && rs.Status == StatusSuccess {
			if v, err := decodeJSON(rs.Result); err == nil {
				st.Results[rs.OperationID] = v
			}
		}
	}
}

// started records run call of operation id: the first pending entry of a
// top-level operation (the plan lists operationOrder), else a new entry.
func (t *opTracker) started(call, typ, id, parent string) {
	if parent == "" {
		for i, o := range t.ops {
			if o.OperationID == id && o.Status == StatusPending {
				t.ops[i].Status, t.byCall[call] = StatusRunning, i
				return
			}
		}
	}
	t.byCall[call] = len(t.ops)
	t.ops = append(t.ops, OperationStatus{OperationID: id, Type: typ, Status: StatusRunning})
}

// list returns the operations. Of an ended execution, those never
// started are left out, and one cut by the execution's end (started, no
// result: a worker killed, a cancel: an end the runtime wrote) is
// listed failed with cutMessage: an ApiCall's request may have reached
// the API, a StoreData's value may be stored (leavesProcess), so a client
// must not read its absence as "never ran".
func (t *opTracker) list(ended bool) []OperationStatus {
	out := make([]OperationStatus, 0, len(t.ops))
	for _, o := range t.ops {
		switch {
		case !ended:
		case o.Status == StatusPending:
			continue
		case o.Status == StatusRunning:
			msg := cutMessage
			if leavesProcess(o.Type) {
				msg += cutActedMessage
			}
			o.Status = StatusFailed
			o.Error = marshal(&Error{Type: ExecutionError, OperationID: o.OperationID, Message: msg, Retryable: !leavesProcess(o.Type)})
		}
		out = append(out, o)
	}
	return out
}

// cutMessage is the error of an operation that an execution's end cut
// (opTracker.list), retryable; an ApiCall's or a StoreData's adds
// cutActedMessage and is not: it may have acted.
const (
	cutMessage      = "the execution ended while this operation ran, before its result was recorded"
	cutActedMessage = ": it may have acted (its request may have reached the API, its value may be stored); check before running the workflow again"
)

// withRetryable is the executor's error object of a final frame with its
// retryable set to the frame's (the e2a.error's retryable is the one the
// runtime and every protocol answer by; frames stored before Error
// carried it have none).
func withRetryable(raw json.RawMessage, retryable bool) json.RawMessage {
	var e map[string]any
	if json.Unmarshal(raw, &e) != nil || e == nil {
		return raw
	}
	e["retryable"] = retryable
	return marshal(e)
}

func (a *API) execution(w http.ResponseWriter, r *http.Request, p Principal) {
	if a.Frames == nil {
		writeError(w, http.StatusNotImplemented, &Error{Type: ExecutionError, Message: "execution lookup is not configured on this server"})
		return
	}
	asked := r.PathValue("id")
	id := asked
	frames, err := a.Frames.Frames(r.Context(), id)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, &Error{Type: ExecutionError, Message: "the execution's frames could not be read", Retryable: true})
		return
	}
	// another principal's execution is reported as unknown, and so is a
	// request that is no workflow execution (frames echo the method: an
	// E2A request without one is not an execution)
	owned := func(frames []*e2a.Response) bool {
		return len(frames) > 0 && p.Tenant().Allows(tenant.Read, frames[0].UserID) && frames[0].Method == Method
	}
	var queued *e2a.Envelope
	if !owned(frames) && a.Tasks != nil {
		// The newest of the caller's executions carrying the executionId,
		// queued (accepted, no frame yet) or not: a reused executionId
		// answers the execution its last execute started.
		if ids, err := a.Tasks.RequestIDs(r.Context(), id); err == nil {
			for i := len(ids) - 1; i >= 0 && queued == nil; i-- {
				fr, err := a.Frames.Frames(r.Context(), ids[i])
				if err == nil && owned(fr) {
					frames, id = fr, ids[i]
					break
				}
				if err == nil && len(fr) == 0 {
					queued = a.queued(r.Context(), p, ids[i])
				}
			}
		}
	}
	if !owned(frames) && queued == nil {
		queued = a.queued(r.Context(), p, asked)
	}
	if queued != nil {
		writeJSON(w, http.StatusOK, queuedStatus(asked, queued))
		return
	}
	if !owned(frames) {
		writeError(w, http.StatusNotFound, &Error{Type: DataError, Message: "execution " + jsonrpc.QuoteForMessage(asked) + " not found"})
		return
	}
	st := statusFromFrames(frames)
	st.ExecutionID, st.RequestID = asked, id
	writeJSON(w, http.StatusOK, st)
}

// queuedStatus is the status of an execution asked by id that no worker
// has started: running, with its plan (the workflow's operationOrder,
// pending, and its executionId) read from env, which the answer already
// read: no other read.
func queuedStatus(asked string, env *e2a.Envelope) *ExecutionStatus {
	st := &ExecutionStatus{ExecutionID: asked, RequestID: env.RequestID, Status: StatusRunning,
		Results: map[string]any{}, Operations: []OperationStatus{}}
	if text, err := WorkflowText(env); err == nil {
		wf, _ := Parse(text)
		p := planOf(env.RequestID, wf)
		st.WorkflowExecutionID, st.Operations = p.WorkflowExecutionID, p.Operations
	}
	return st
}

// queued returns the envelope of the caller's execution rid (a request
// id) that was accepted but has no frame yet (QueuedSource); nil when
// there is none, it is another principal's, or it is no workflow's.
func (a *API) queued(ctx context.Context, p Principal, rid string) *e2a.Envelope {
	qs, ok := a.Frames.(QueuedSource)
	if !ok {
		return nil
	}
	env, err := qs.Queued(ctx, rid)
	if err == nil && env != nil && p.Tenant().Allows(tenant.Read, env.UserID) && env.Method == Method {
		return env
	}
	return nil
}

func (a *API) rateLimit(w http.ResponseWriter, r *http.Request, p Principal) {
	if a.RateLimits == nil {
		writeError(w, http.StatusNotImplemented, &Error{Type: ExecutionError, Message: "rate limiting is not configured on this server"})
		return
	}
	st, err := a.RateLimits.Status(r.Context(), p.ID)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, &Error{Type: ExecutionError, Message: "the rate-limit state could not be read", Retryable: true})
		return
	}
	if st.AgentID == "" {
		st.AgentID = p.ID
	}
	writeJSON(w, http.StatusOK, st)
}
