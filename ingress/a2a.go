package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// rpcShape writes a refusal as a JSON-RPC error object (id null) with the
// failure's HTTP status: A2A clients see the status, AgentVault clients the
// code.
func rpcShape(w http.ResponseWriter, f failure) { rpcRefusal(w, nil, f) }

// rpcRefusal writes f as a JSON-RPC error response with id and f's status.
func rpcRefusal(w http.ResponseWriter, id json.RawMessage, f failure) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Status)
	_ = json.NewEncoder(w).Encode(jsonrpc.ErrorResponse(id, &Error{Code: f.RPCCode, Message: f.Message, Data: f.Data}))
}

// rpcShapeWithID is rpcShape echoing the id of body's call when it is
// readable (body is parsed only for a refusal).
func rpcShapeWithID(body []byte) errorShape {
	return func(w http.ResponseWriter, f failure) {
		var head struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(body, &head) != nil || !validRPCID(head.ID) {
			head.ID = nil
		}
		rpcRefusal(w, head.ID, f)
	}
}

// validRPCID reports a JSON-RPC id: a string, a number or null.
func validRPCID(id json.RawMessage) bool {
	id = bytes.TrimSpace(id)
	if len(id) == 0 {
		return false
	}
	switch id[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'n':
		var v any
		return json.Unmarshal(id, &v) == nil
	}
	return false
}

// The JSON-RPC dispatch table of /a2a (package protocols; /acp's is
// package protocols/acp's endpoint).
var a2aEndpoint = protocols.At("/a2a")

// handleA2A serves POST /a2a: A2A v0.3 (message/send, message/stream,
// tasks/get, tasks/cancel, tasks/resubscribe) and the AgentVault profile
// (tasks/send, tasks/sendSubscribe, tasks/get, tasks/cancel) on one
// JSON-RPC endpoint. tasks/get and tasks/cancel are answered in the shape of
// the protocol that created the task.
//
// A single call of an A2A v1.0 method (SendMessage…) is served by the v1.0
// handler, as at A2AV1Path: clients and the A2A TCK that resolve the card's
// v0.3 url for JSON-RPC whatever the version reach v1.0 here too (method
// names of the two generations never collide).
func (s *Server) handleA2A(w http.ResponseWriter, r *http.Request) {
	body, v1, ok := s.peekV1Call(w, r)
	if !ok {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if v1 {
		s.v1rpc.ServeHTTP(w, r)
		return
	}
	s.serveRPC(w, r, rpcEndpoint{protocol: "a2a", shape: rpcShapeWithID(body), streaming: a2aEndpoint.Streaming, metric: a2aEndpoint.Label,
		call: s.a2aCall, notifyErrors: true})
}

// readRPCBody reads the body with the size limit, answering 413 with a
// JSON-RPC error when it is too large.
func (s *Server) readRPCBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.maxBody)
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r.Body); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			rpcShape(w, failure{Status: http.StatusRequestEntityTooLarge, RPCCode: jsonrpc.CodeInvalidRequest,
				Message: "Invalid Request: body exceeds " + strconv.FormatInt(s.opts.maxBody, 10) + " bytes"})
			return nil, false
		}
		rpcShape(w, failure{Status: http.StatusBadRequest, RPCCode: jsonrpc.CodeParseError, Message: "Parse error: could not read the body"})
		return nil, false
	}
	return buf.Bytes(), true
}

// sseErrors writes a JSON answer as one SSE event (data: the JSON-RPC
// response) and passes an event stream through: a client of a streaming
// method (message/stream, tasks/resubscribe, tasks/sendSubscribe) reads
// every answer, errors included, as the stream it asked for.
type sseErrors struct {
	http.ResponseWriter
	decided, sse bool
}

func (w *sseErrors) decide() {
	if w.decided {
		return
	}
	w.decided = true
	if strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		w.sse = true
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Accel-Buffering", "no")
	}
}

func (w *sseErrors) WriteHeader(code int) {
	w.decide()
	w.ResponseWriter.WriteHeader(code)
}

func (w *sseErrors) Write(b []byte) (int, error) {
	w.decide()
	if !w.sse {
		return w.ResponseWriter.Write(b)
	}
	event := append(append([]byte("data: "), bytes.TrimRight(b, "\n")...), '\n', '\n')
	if _, err := w.ResponseWriter.Write(event); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// deadlines) of a stream.
func (w *sseErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// a2aCall answers one A2A or AgentVault JSON-RPC request.
func (s *Server) a2aCall(rep host.Reply, in host.Call, p Principal, req *Request) {
	if sw := rep.Stream(); sw != nil && a2aEndpoint.Streaming(req.Method) {
		rep = httpReply{w: &sseErrors{ResponseWriter: sw}, id: req.ID}
	}
	// The request is already decoded: the adapters read it as is, with no
	// second encode and parse.
	nin := s.rpcInput(in, p, req)
	pr, _, known := a2aEndpoint.Method(req.Method)
	if !known {
		pr, _ = protocols.Lookup(protocols.A2A) // its adapter answers -32601
	}
	if req.Method == normalizer.A2ATasksGet || req.Method == normalizer.A2ATasksCancel {
		// Shared names: the task's record says which protocol made it.
		// Only the caller's own tasks are looked at, so the answer's shape
		// says nothing about another principal's task.
		var id struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(req.Params, &id)
		if rec, gerr := s.ownedRecord(in.Ctx, p, KindTask, id.ID, tenant.Read); gerr == nil && rec.Protocol == normalizer.ProtocolAgentVault {
			pr, _ = protocols.Lookup(protocols.AgentVault)
		}
	}
	adapt, _ := s.opts.norm.Adapter(pr.Adapter)
	res, err := adapt(nin)
	if err != nil {
		rep.Error(&Error{Code: normalizer.JSONRPCCode(err), Message: err.Error()})
		return
	}
	protocol := pr.Adapter
	env := res.Envelope
	switch res.Op {
	case normalizer.OpSubmit:
		s.a2aSubmit(rep, in, p, protocol, res, req)
	case normalizer.OpQuery:
		rec, gerr := s.ownedRecord(in.Ctx, p, KindTask, env.TaskID, tenant.Read)
		if gerr != nil {
			taskNotFound(rep, protocol, env.TaskID)
			return
		}
		if protocol == normalizer.ProtocolAgentVault {
			answer(rep, pr.Errors)(s.egress.AgentVaultTaskOf(in.Ctx, rec.ID, rec.RequestIDs))
			return
		}
		answer(rep, pr.Errors)(s.egress.A2ATask(in.Ctx, rec.ID, rec.ContextID, rec.RequestIDs, historyLength(env)))
	case normalizer.OpCancel:
		rec, gerr := s.ownedRecord(in.Ctx, p, KindTask, env.TaskID, tenant.Write)
		if gerr != nil {
			taskNotFound(rep, protocol, env.TaskID)
			return
		}
		if protocol == normalizer.ProtocolAgentVault {
			answer(rep, pr.Errors)(s.egress.AgentVaultCancel(in.Ctx, rec.RequestIDs, s.cancel))
			return
		}
		answer(rep, pr.Errors)(s.egress.A2ACancel(in.Ctx, rec.ID, rec.ContextID, rec.RequestIDs, s.cancel))
	case normalizer.OpSubscribe:
		rec, gerr := s.ownedRecord(in.Ctx, p, KindTask, env.TaskID, tenant.Read)
		if gerr != nil {
			taskNotFound(rep, protocol, env.TaskID)
			return
		}
		w := rep.Stream()
		if w == nil {
			return // a notification: nothing to follow
		}
		release, ok := s.rpcStreamSlot(rep, p)
		if !ok {
			return
		}
		defer release()
		if protocol == normalizer.ProtocolAgentVault {
			s.egress.ServeAgentVaultStream(w, in.Request, rec.LastRequest(), egress.AgentVaultParams{JSONRPCID: req.ID, TaskID: rec.ID})
			return
		}
		s.egress.ServeA2AResubscribe(w, in.Request, rec.LastRequest(), egress.A2AParams{JSONRPCID: req.ID, TaskID: rec.ID, ContextID: rec.ContextID,
			Interaction: interaction(in.Header, env)})
	default:
		rep.Error(jsonrpc.MethodNotFound(req.Method))
	}
}

// answer returns the function that answers a result, or its error mapped
// with toRPC.
func answer(rep host.Reply, toRPC func(error) *Error) func(any, error) {
	return func(v any, err error) {
		if err != nil {
			rep.Error(toRPC(err))
			return
		}
		rep.Result(v)
	}
}

// peekV1Call reads the body (within the size limit) and reports whether it
// is one call of an A2A v1.0 method. The common case costs a byte search:
// the body is parsed only when a v1.0 method name occurs in it.
func (s *Server) peekV1Call(w http.ResponseWriter, r *http.Request) (body []byte, v1 bool, ok bool) {
	body, ok = s.readRPCBody(w, r)
	if !ok {
		return nil, false, false
	}
	found := false
	for _, m := range a2aV1.Methods {
		if bytes.Contains(body, []byte(`"`+m.Name+`"`)) {
			found = true
			break
		}
	}
	if !found {
		return body, false, true
	}
	var head struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &head) != nil {
		return body, false, true // a batch or not JSON: the v0.3 path answers
	}
	return body, a2aV1Method(head.Method), true
}

var a2aV1, _ = protocols.Lookup(protocols.A2AV1)

// a2aV1Method reports the A2A v1.0 JSON-RPC method names.
func a2aV1Method(m string) bool {
	pr, _, ok := a2aEndpoint.Method(m)
	return ok && pr.Name == protocols.A2AV1
}

// taskNotFound answers an unknown task (or another principal's) in the
// protocol's words.
func taskNotFound(rep host.Reply, protocol string, taskID string) {
	if protocol == normalizer.ProtocolAgentVault {
		rep.Error(&Error{Code: jsonrpc.CodeAVTaskNotFound, Message: "Task not found: " + taskID})
		return
	}
	rep.Error(&Error{Code: jsonrpc.CodeA2ATaskNotFound, Message: "Task not found"})
}

// a2aSubmit publishes a message/send, message/stream, tasks/send or
// tasks/sendSubscribe request, records it on its task, and hands the answer
// to egress.
func (s *Server) a2aSubmit(rep host.Reply, in host.Call, p Principal, protocol string, res *normalizer.Result, req *Request) {
	env := res.Envelope
	if env.TaskID != "" && continued(env) {
		rec, err := s.ownedRecord(in.Ctx, p, KindTask, env.TaskID, tenant.Write)
		if err != nil {
			taskNotFound(rep, protocol, env.TaskID)
			return
		}
		if protocol == normalizer.ProtocolA2A {
			if err := s.taskOpen(in.Ctx, rec); err != nil {
				s.rpcPublishError(rep, err)
				return
			}
		}
		// A continued task keeps its context when the message names none
		// (the adapter made up a new one).
		if created, _ := env.Provenance.Details[normalizer.DetailContextCreated].(bool); env.ContextID == "" || (created && rec.ContextID != "") {
			env.ContextID = rec.ContextID
			delete(env.Provenance.Details, normalizer.DetailContextCreated)
		}
	} else if env.ContextID != "" {
		// A new context is recorded as the caller's; one the client chose
		// must be the caller's own already.
		if err := s.claimContext(in.Ctx, p, env.ContextID); err != nil {
			s.rpcPublishError(rep, err)
			return
		}
	}
	w := rep.Stream()
	if w != nil && a2aEndpoint.Streaming(req.Method) {
		release, ok := s.rpcStreamSlot(rep, p)
		if !ok {
			return
		}
		defer release()
	}
	submitted := time.Now()
	acc, ok := s.publishRPC(rep, in, p, res.Pool, env)
	if !ok {
		return
	}
	if env.TaskID != "" {
		record := s.opts.tasks.Append
		if !continued(env) {
			record = s.opts.tasks.AppendNew // the adapter made the id up: one write, no read
		}
		if _, err := record(in.Ctx, KindTask, TaskRecord{ID: env.TaskID, ContextID: env.ContextID,
			Protocol: protocol, Pool: res.Pool, Principal: p.UserID}, acc.RequestID, p.Tenant()); err != nil {
			s.opts.log.Warn("task index update failed", "task_id", env.TaskID, "request_id", acc.RequestID, "err", err)
		}
	}
	if req.IsNotification() {
		return // published; nothing to answer
	}
	params := egress.A2AParams{JSONRPCID: req.ID, TaskID: env.TaskID, ContextID: env.ContextID, HistoryLength: historyLength(env),
		AcceptedOutputModes: env.ExpectedOutputModes, Interaction: interaction(in.Header, env)}
	switch req.Method {
	case normalizer.A2AMessageStream:
		if w == nil {
			return
		}
		s.egress.ServeA2AStream(w, in.Request, acc.RequestID, egress.A2AParams{JSONRPCID: req.ID, TaskID: env.TaskID, ContextID: env.ContextID, Submitted: submitted,
			AcceptedOutputModes: env.ExpectedOutputModes, Interaction: interaction(in.Header, env)})
	case normalizer.A2AMessageSend:
		if b, ok := env.Params["blocking"].(bool); ok && !b {
			// configuration.blocking false: the task at once, submitted;
			// the client polls tasks/get or cancels it.
			t := egress.BuildA2ATask(env.TaskID, env.ContextID, []egress.A2ARequest{{Envelope: env}}, historyLength(env))
			ts := submitted.UTC()
			t.Status.Timestamp = &ts
			rep.Result(t)
			return
		}
		if w != nil {
			// One HTTP answer: rendered as the frames come, with blank
			// lines while the agent is idle.
			s.egress.ServeA2ASend(w, in.Request, acc.RequestID, params)
			return
		}
		answer(rep, egress.A2AError)(s.egress.A2AResult(in.Ctx, acc.RequestID, params, egress.WithoutRequestCheck()))
	case normalizer.AVTasksSendSubscribe:
		if w == nil {
			return
		}
		s.egress.ServeAgentVaultStream(w, in.Request, acc.RequestID, egress.AgentVaultParams{JSONRPCID: req.ID, TaskID: env.TaskID})
	default: // tasks/send
		rep.Result(map[string]string{"id": env.TaskID})
	}
}

// interaction reports whether the client declared the trpc interaction
// spec: interaction_spec_version in the message metadata (the spec's way),
// or the extension's URI in the A2A X-A2A-Extensions header.
func interaction(header http.Header, env *e2a.Envelope) bool {
	if env.Provenance != nil {
		if v, _ := env.Provenance.Details[normalizer.DetailInteractionSpecVersion].(string); v != "" {
			return true
		}
	}
	// X-A2A-Extensions in v0.3, A2A-Extensions in v1.0.
	for _, name := range []string{"X-A2A-Extensions", "A2A-Extensions"} {
		for _, h := range header.Values(name) {
			for _, u := range strings.Split(h, ",") {
				if strings.TrimSpace(u) == TRPCInteractionExtension {
					return true
				}
			}
		}
	}
	return false
}

// continued reports whether the adapter marked the request as continuing
// an existing task.
func continued(env *e2a.Envelope) bool {
	if env.Provenance == nil {
		return false
	}
	v, _ := env.Provenance.Details[normalizer.DetailTaskContinued].(bool)
	return v
}

func historyLength(env *e2a.Envelope) *int {
	if env.Params == nil {
		return nil
	}
	if _, ok := env.Params["history_length"]; !ok {
		return nil
	}
	n := int(env.ParamInt("history_length", 0))
	return &n
}

// publishRPC publishes env for p and answers JSON-RPC errors itself on
// failure.
func (s *Server) publishRPC(rep host.Reply, in host.Call, p Principal, pool string, env *e2a.Envelope) (Accepted, bool) {
	start := time.Now()
	acc, err := s.publish(in.Ctx, p, pool, env)
	s.metrics.publish.Observe(time.Since(start).Seconds())
	if err != nil {
		s.rpcPublishError(rep, err)
		return acc, false
	}
	if acc.Warning != "" {
		rep.Header().Set(HeaderWarning, acc.Warning)
	}
	return acc, true
}

// rpcPublishError answers an error of publish or claimContext on a
// JSON-RPC endpoint.
func (s *Server) rpcPublishError(rep host.Reply, err error) {
	switch {
	case errors.Is(err, context.Canceled):
		// The caller went away (or, on stdio, cancelled the call, which
		// answers -32800 itself): nothing to answer.
	case errors.Is(err, ErrInvalidPool), errors.Is(err, ErrUnknownPool):
		rep.Error(jsonrpc.InvalidParams(err.Error()))
	case errors.Is(err, ErrTooLarge):
		// Never publishable as it is: 413, as readRPCBody, with the id.
		rep.Refuse(failure{Status: http.StatusRequestEntityTooLarge, RPCCode: jsonrpc.CodeInvalidRequest, Message: "Invalid Request: " + err.Error(),
			Data: map[string]any{"code": "body_too_large", "retryable": false}})
	case errors.Is(err, ErrTaskTerminal):
		rep.Error(&Error{Code: jsonrpc.CodeA2AUnsupportedOperation, Message: "This operation is not supported: " + strings.TrimPrefix(err.Error(), "ingress: ")})
	case errors.Is(err, ErrConflict):
		// The id is taken by another principal: a conflict that says
		// nothing of the other's request.
		rep.Error(&Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: the id (Idempotency-Key or contextId) is already in use; choose another",
			Data: map[string]any{"conflict": true, "retryable": false}})
	default:
		rep.Header().Set("Retry-After", "1")
		rep.Refuse(failure{Status: http.StatusServiceUnavailable, RPCCode: jsonrpc.CodeInternalError,
			Message: "the pipeline could not accept the request; retry later", Data: map[string]any{"retryable": true}})
	}
}

// cancel publishes a cancel on the request's control subject.
func (s *Server) cancel(ctx context.Context, requestID string) error {
	_, err := agent.Cancel(ctx, s.js, requestID)
	return err
}
