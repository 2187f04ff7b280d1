package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	acp "github.com/coder/acp-go-sdk"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// POST /acp serves the Agent Client Protocol (ACP) as JSON-RPC 2.0 over
// HTTP; `e2a acp` serves the same methods over stdio (see ServeACPStdio).
//
//   - initialize, authenticate, logout are answered locally: protocol
//     version 1, loadSession, the prompt capabilities, and one auth method
//     per configured scheme (over HTTP the credential travels in the
//     headers, so authenticate only checks the method id).
//   - session/new creates a session (a UUIDv7) in the task store
//     (KindSession) with its cwd and MCP servers (secret values removed) and
//     answers {sessionId}.
//   - session/prompt publishes the envelope, appends the request to the
//     session, and streams session/update notifications then the result
//     {stopReason}: NDJSON (default, Accept: application/x-ndjson) or SSE
//     (Accept: text/event-stream), one JSON-RPC message per line or event.
//     The session's cwd and mcpServers are added to the envelope's params
//     (when the prompt has no such keys), and the keys of
//     params._meta.e2a_params are lifted into params (never overwriting):
//     ACP's PromptRequest has no room for pipeline parameters, and
//     normalizer.EnvelopeToACPPeerCall moves them to the same place.
//   - session/load replays the session's history (user_message_chunk for
//     each prompt, then the agent's updates) as session/update
//     notifications, framed like session/prompt, then the result
//     LoadSessionResponse {} (no modes, models or config options).
//   - session/cancel (a notification) cancels the session's last request;
//     the pending session/prompt then ends with stopReason "cancelled".
//   - session/list, session/fork, session/resume and session/close: the
//     pipeline owns sessions and does not implement these: -32601.
//   - session/set_mode, session/set_model and session/set_config_option:
//     session/new advertises no modes, models or config options (an agent
//     pool cannot announce them), so by the schema these are -32601 and are
//     never forwarded to an agent.
//   - any other method the normalizer accepts (extension methods "_…",
//     document and provider methods, …) is passed through to
//     the agent pool: published, then answered with the request's final
//     frame (e2a.complete → result, e2a.error → error). As a notification it
//     is only published.
//
// Unknown sessions are answered with ACP's -32002 (resource not found); a
// session of another principal is unknown. Auth failures use ACP's -32000
// (authentication required) with HTTP 401.

// ACPProtocolVersion is the ACP protocol version this front door speaks.
const ACPProtocolVersion = 1

// kindACPSessionConfig keys the cwd and MCP servers of an ACP session in
// the task bucket, beside the session's TaskRecord.
const kindACPSessionConfig = "acp_session"

// acpSessionConfig is what session/new (or session/load) said about the
// client's environment; secret values of MCP servers are removed.
type acpSessionConfig struct {
	Cwd                   string   `json:"cwd"`
	McpServers            []any    `json:"mcpServers"`
	AdditionalDirectories []string `json:"additionalDirectories,omitempty"`
}

// acpShape writes a refusal as a JSON-RPC error (id null) with the HTTP
// status, using ACP's "authentication required" code for 401.
func acpShape(w http.ResponseWriter, f failure) {
	if f.RPCCode == jsonrpc.CodeAuthentication {
		f.RPCCode = jsonrpc.CodeACPAuthRequired
	}
	rpcShape(w, f)
}

// handleACP serves POST /acp.
func (s *Server) handleACP(w http.ResponseWriter, r *http.Request) {
	s.serveRPC(w, r, rpcEndpoint{protocol: "acp", shape: acpShape, streaming: acpEndpoint.Streaming, metric: acpEndpoint.Label, call: s.acpCall})
}

// acpNotImplemented are the ACP methods answered -32601 whatever their
// params: session management the pipeline owns, and the mode, model and
// config-option setters of capabilities session/new never advertises.
var acpNotImplemented = map[string]bool{
	acp.AgentMethodSessionList: true, acp.AgentMethodSessionFork: true, acp.AgentMethodSessionResume: true,
	acp.AgentMethodSessionClose: true, acp.AgentMethodSessionSetMode: true, acp.AgentMethodSessionSetModel: true,
	acp.AgentMethodSessionSetConfigOption: true,
}

// acpCall answers one ACP request; for a notification (no id) it acts but
// writes nothing worth reading and never waits for an agent.
func (s *Server) acpCall(rep rpcReply, in rpcIn, p Principal, req *Request) {
	nin := s.rpcInput(in, p, req)
	if acpNotImplemented[req.Method] {
		rep.Error(jsonrpc.MethodNotFound(req.Method))
		return
	}
	res, err := s.opts.norm.FromACP(nin)
	if err != nil {
		rep.Error(&Error{Code: normalizer.JSONRPCCode(err), Message: err.Error()})
		return
	}
	switch req.Method {
	case e2a.ACPInitialize:
		s.acpInitialize(rep, req)
	case e2a.ACPAuthenticate:
		s.acpAuthenticate(rep, req)
	case acp.AgentMethodLogout:
		rep.Result(map[string]any{})
	case e2a.ACPSessionNew:
		s.acpSessionNew(rep, in, p, res, req)
	case e2a.ACPSessionLoad:
		s.acpSessionLoad(rep, in, p, res, req)
	case e2a.ACPSessionPrompt:
		s.acpPrompt(rep, in, p, res, req)
	case e2a.ACPSessionCancel:
		s.acpCancel(rep, in, p, res, req)
	default:
		if res.Op != normalizer.OpSubmit {
			rep.Error(jsonrpc.MethodNotFound(req.Method))
			return
		}
		s.acpPassThrough(rep, in, p, res, req)
	}
}

// acpAuthMethods lists one ACP auth method per configured scheme.
func (s *Server) acpAuthMethods() []map[string]any {
	out := []map[string]any{}
	if s.opts.auth == nil {
		return out
	}
	for _, sc := range s.opts.auth.Schemes() {
		var name, desc string
		switch sc {
		case SchemeAPIKey:
			name, desc = "API key", "send the key in the "+HeaderAPIKey+" header"
		case SchemeBearer:
			name, desc = "Bearer token", "send Authorization: Bearer <token>"
		case SchemeOAuth2:
			name, desc = "OAuth2 client credentials", "get a token from POST /oauth/token, send Authorization: Bearer <token>"
		default:
			continue
		}
		out = append(out, map[string]any{"id": sc, "name": name, "description": desc})
	}
	return out
}

func (s *Server) acpInitialize(rep rpcReply, req *Request) {
	var params struct {
		ProtocolVersion json.RawMessage `json:"protocolVersion"`
	}
	_ = json.Unmarshal(req.Params, &params)
	if _, err := strconv.ParseUint(string(params.ProtocolVersion), 10, 16); err != nil {
		rep.Error(jsonrpc.InvalidParams("protocolVersion must be an integer"))
		return
	}
	rep.Result(map[string]any{
		"protocolVersion": ACPProtocolVersion,
		"agentCapabilities": map[string]any{
			"loadSession":        true,
			"promptCapabilities": map[string]any{"image": true, "audio": true, "embeddedContext": true},
		},
		"authMethods": s.acpAuthMethods(),
		"agentInfo":   map[string]any{"name": "e2a-pipeline", "title": "E2A Pipeline", "version": "1"},
	})
}

// acpAuthenticate accepts a configured method: the request carrying it has
// already passed auth.
func (s *Server) acpAuthenticate(rep rpcReply, req *Request) {
	var params struct {
		MethodID string `json:"methodId"`
	}
	_ = json.Unmarshal(req.Params, &params)
	if params.MethodID == "" {
		rep.Error(jsonrpc.InvalidParams("methodId is required"))
		return
	}
	for _, m := range s.acpAuthMethods() {
		if m["id"] == params.MethodID {
			rep.Result(map[string]any{})
			return
		}
	}
	rep.Error(jsonrpc.InvalidParams("unknown auth method " + jsonrpc.QuoteForMessage(params.MethodID)))
}

// readSessionConfig reads cwd, mcpServers and additionalDirectories of
// session/new or session/load params. cwd is required when need is true.
func readSessionConfig(raw json.RawMessage, need bool) (*acpSessionConfig, *Error) {
	var params struct {
		Cwd                   *string         `json:"cwd"`
		McpServers            json.RawMessage `json:"mcpServers"`
		AdditionalDirectories []string        `json:"additionalDirectories"`
	}
	if err := json.Unmarshal(raw, &params); err != nil && len(raw) > 0 {
		return nil, jsonrpc.InvalidParams("cwd must be a string, mcpServers an array")
	}
	if params.Cwd == nil || *params.Cwd == "" {
		if need {
			return nil, jsonrpc.InvalidParams("cwd is required")
		}
		return nil, nil
	}
	cfg := &acpSessionConfig{Cwd: *params.Cwd, McpServers: []any{}, AdditionalDirectories: params.AdditionalDirectories}
	if len(params.McpServers) > 0 && string(params.McpServers) != "null" {
		if err := json.Unmarshal(params.McpServers, &cfg.McpServers); err != nil {
			return nil, jsonrpc.InvalidParams("mcpServers must be an array")
		}
	}
	for _, m := range cfg.McpServers {
		stripMCPSecrets(m)
	}
	return cfg, nil
}

// stripMCPSecrets removes the secrets of an MCP server: every value of its
// environment variables and HTTP headers, and secret args (--token X), by
// the normalizer's rule (normalizer.StripMCPServers); names stay.
func stripMCPSecrets(v any) { normalizer.StripMCPServers([]any{v}) }

func newSessionID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

func (s *Server) acpSessionNew(rep rpcReply, in rpcIn, p Principal, res *normalizer.Result, req *Request) {
	cfg, rerr := readSessionConfig(req.Params, true)
	if rerr != nil {
		rep.Error(rerr)
		return
	}
	if req.IsNotification() {
		return // nobody would learn the session id
	}
	id := newSessionID()
	if err := s.putSessionConfig(in.ctx, id, cfg); err != nil {
		s.acpStoreFailed(rep, req, "session store", err)
		return
	}
	now := e2a.FormatTime(s.opts.now())
	rec := TaskRecord{ID: id, Protocol: normalizer.ProtocolACP, Pool: res.Pool, Principal: p.UserID,
		RequestIDs: []string{}, Created: now, Updated: now}
	if err := s.createSession(in.ctx, rec); err != nil {
		s.acpStoreFailed(rep, req, "session store", err)
		return
	}
	rep.Result(map[string]any{"sessionId": id})
}

func (s *Server) acpStoreFailed(rep rpcReply, req *Request, what string, err error) {
	if errors.Is(err, context.Canceled) {
		return // the caller went away or cancelled the call: nothing to answer
	}
	s.opts.log.Warn("acp: "+what+" failed", "method", req.Method, "err", err)
	rep.Header().Set("Retry-After", "1")
	rep.Refuse(failure{Status: http.StatusServiceUnavailable, RPCCode: jsonrpc.CodeInternalError,
		Message: "the pipeline could not store the session; retry later", Data: map[string]any{"retryable": true}})
}

// createSession writes a new session record with no request yet.
func (s *Server) createSession(ctx context.Context, rec TaskRecord) error {
	key, err := taskKey(KindSession, rec.ID)
	if err != nil {
		return err
	}
	data, _ := json.Marshal(rec)
	_, err = s.opts.tasks.kv.Create(ctx, key, data)
	return err
}

func (s *Server) putSessionConfig(ctx context.Context, id string, cfg *acpSessionConfig) error {
	key, err := taskKey(kindACPSessionConfig, id)
	if err != nil {
		return err
	}
	data, _ := json.Marshal(cfg)
	_, err = s.opts.tasks.kv.Put(ctx, key, data)
	return err
}

func (s *Server) sessionConfig(ctx context.Context, id string) *acpSessionConfig {
	key, err := taskKey(kindACPSessionConfig, id)
	if err != nil {
		return nil
	}
	e, err := s.opts.tasks.kv.Get(ctx, key)
	if err != nil {
		return nil
	}
	var cfg acpSessionConfig
	if json.Unmarshal(e.Value(), &cfg) != nil {
		return nil
	}
	return &cfg
}

// session returns the session record of the principal, answering the
// error itself (when the request has an id) and returning nil otherwise.
func (s *Server) session(rep rpcReply, in rpcIn, p Principal, req *Request, id string, a tenant.Access) *TaskRecord {
	rec, err := s.ownedRecord(in.ctx, p, KindSession, id, a)
	if err == nil && rec.Protocol != normalizer.ProtocolACP {
		err = ErrTaskNotFound
	}
	if err != nil {
		if errors.Is(err, ErrTaskNotFound) {
			rep.Error(&Error{Code: jsonrpc.CodeACPResourceNotFound, Message: "Resource not found: session " + jsonrpc.QuoteForMessage(id),
				Data: map[string]any{"sessionId": id}})
			return nil
		}
		s.acpStoreFailed(rep, req, "session lookup", err)
		return nil
	}
	return rec
}

// acpPrompt publishes a session/prompt and streams its answer.
func (s *Server) acpPrompt(rep rpcReply, in rpcIn, p Principal, res *normalizer.Result, req *Request) {
	env := res.Envelope
	rec := s.session(rep, in, p, req, env.SessionID, tenant.Write)
	if rec == nil {
		return
	}
	liftE2AParams(env)
	if cfg := s.sessionConfig(in.ctx, env.SessionID); cfg != nil {
		if _, ok := env.Params["cwd"]; !ok {
			env.Params["cwd"] = cfg.Cwd
		}
		if _, ok := env.Params["mcpServers"]; !ok {
			env.Params["mcpServers"] = cfg.McpServers
		}
	}
	var release func()
	if !req.IsNotification() {
		var ok bool
		if release, ok = s.rpcStreamSlot(rep, p); !ok {
			return
		}
		defer release()
	}
	acc, ok := s.publishRPC(rep, in, p, res.Pool, env)
	if !ok {
		return
	}
	if _, err := s.opts.tasks.Append(in.ctx, KindSession, TaskRecord{ID: env.SessionID, Protocol: normalizer.ProtocolACP,
		Pool: res.Pool, Principal: p.UserID}, acc.RequestID, p.Tenant()); err != nil {
		s.opts.log.Warn("session index update failed", "session_id", env.SessionID, "request_id", acc.RequestID, "err", err)
	}
	w := rep.Stream()
	if w == nil {
		return // a notification: published only
	}
	params := egress.ACPParams{JSONRPCID: req.ID, SessionID: env.SessionID}
	if in.r == nil {
		// stdio: NDJSON lines, from the first frame.
		s.egress.ACPStream(in.ctx, w, acc.RequestID, params, 0)
		return
	}
	s.egress.ServeACP(w, in.r, acc.RequestID, params)
}

// liftE2AParams copies the keys of params._meta.e2a_params into params,
// never overwriting one.
func liftE2AParams(env *e2a.Envelope) {
	if env.Params == nil {
		env.Params = map[string]any{}
	}
	meta, _ := env.Params["_meta"].(map[string]any)
	extra, _ := meta["e2a_params"].(map[string]any)
	for k, v := range extra {
		if _, ok := env.Params[k]; !ok {
			env.Params[k] = v
		}
	}
}

// acpCancel cancels the session's last request. The worker then writes the
// final cancelled frame, which ends the pending session/prompt with
// stopReason "cancelled".
func (s *Server) acpCancel(rep rpcReply, in rpcIn, p Principal, res *normalizer.Result, req *Request) {
	rec := s.session(rep, in, p, req, res.Envelope.SessionID, tenant.Write)
	if rec == nil {
		return
	}
	if last := rec.LastRequest(); last != "" {
		if err := s.cancel(in.ctx, last); err != nil {
			s.opts.log.Warn("acp: cancel failed", "session_id", rec.ID, "request_id", last, "err", err)
			rep.Error(jsonrpc.InternalError("the cancel could not be delivered; retry"))
			return
		}
	}
	rep.Result(nil)
}

// acpStream writes the JSON-RPC messages of one streamed answer: NDJSON
// lines, or SSE events when the client accepts only text/event-stream.
type acpStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	sse     bool
	started bool
}

func newACPStream(w http.ResponseWriter, header http.Header) *acpStream {
	a := header.Get("Accept")
	sse := strings.Contains(a, "text/event-stream") && !strings.Contains(a, "application/x-ndjson")
	return &acpStream{w: w, rc: http.NewResponseController(w), sse: sse}
}

func (st *acpStream) emit(v any) error {
	if !st.started {
		st.started = true
		h := st.w.Header()
		if st.sse {
			h.Set("Content-Type", "text/event-stream")
		} else {
			h.Set("Content-Type", "application/x-ndjson")
		}
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		st.w.WriteHeader(http.StatusOK)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if st.sse {
		b = append(append([]byte("data: "), b...), '\n', '\n')
	} else {
		b = append(b, '\n')
	}
	if _, err := st.w.Write(b); err != nil {
		return err
	}
	_ = st.rc.Flush()
	return nil
}

// acpSessionLoad replays a session's history, then answers a
// LoadSessionResponse.
func (s *Server) acpSessionLoad(rep rpcReply, in rpcIn, p Principal, res *normalizer.Result, req *Request) {
	id := res.Envelope.SessionID
	cfg, rerr := readSessionConfig(req.Params, false)
	if rerr != nil {
		rep.Error(rerr)
		return
	}
	access := tenant.Read
	if cfg != nil {
		access = tenant.Write // it replaces the session's configuration
	}
	rec := s.session(rep, in, p, req, id, access)
	if rec == nil || req.IsNotification() {
		return
	}
	if cfg != nil {
		if err := s.putSessionConfig(in.ctx, id, cfg); err != nil {
			s.opts.log.Warn("acp: session config update failed", "session_id", id, "err", err)
		}
	}
	w := rep.Stream()
	if w == nil {
		return
	}
	release, ok := s.rpcStreamSlot(rep, p)
	if !ok {
		return
	}
	defer release()
	st := newACPStream(w, in.header)
	update := func(u acp.SessionUpdate) error {
		return st.emit(jsonrpc.Notification{JSONRPC: "2.0", Method: e2a.ACPSessionUpdate,
			Params: acp.SessionNotification{SessionId: acp.SessionId(id), Update: u}})
	}
	if err := s.replaySession(in.ctx, rec, update); err != nil {
		if in.ctx.Err() != nil {
			return
		}
		s.opts.log.Warn("acp: session replay failed", "session_id", id, "err", err)
		_ = st.emit(jsonrpc.ErrorResponse(req.ID, jsonrpc.InternalError("the session history could not be read")))
		return
	}
	_ = st.emit(jsonrpc.ResultResponse(req.ID, acp.LoadSessionResponse{}))
}

// replaySession calls update with the session/update notifications of the
// session's history: each prompt's content blocks as user_message_chunk,
// then the updates of the frames the agent has written so far.
func (s *Server) replaySession(ctx context.Context, rec *TaskRecord, update func(acp.SessionUpdate) error) error {
	reqStream, err := s.js.Stream(ctx, streams.RequestsStream)
	if err != nil {
		return err
	}
	for _, id := range rec.RequestIDs {
		if env := loadEnvelope(ctx, reqStream, id); env != nil {
			blocks, _ := normalizer.MergeParamsToACPPrompt(env)["prompt"].([]any)
			for _, b := range blocks {
				data, _ := json.Marshal(b)
				var cb acp.ContentBlock
				if json.Unmarshal(data, &cb) != nil {
					continue
				}
				if err := update(acp.UpdateUserMessage(cb)); err != nil {
					return err
				}
			}
		}
		rd, err := egress.Open(ctx, s.nc, id, 0, egress.WithoutRequestCheck())
		if err != nil {
			if errors.Is(err, egress.ErrNotFound) {
				continue
			}
			return err
		}
		for {
			f, ok, err := rd.NextStored(ctx)
			if err != nil && !errors.Is(err, io.EOF) {
				rd.Close()
				return err
			}
			if !ok || err != nil {
				break
			}
			ups, _ := egress.ACPUpdates(f.Response)
			for _, u := range ups {
				if err := update(u); err != nil {
					rd.Close()
					return err
				}
			}
		}
		rd.Close()
	}
	return nil
}

// loadEnvelope reads the envelope of requestID from E2A_REQUESTS, whatever
// its pool; nil when the stream no longer holds it.
func loadEnvelope(ctx context.Context, st jetstream.Stream, requestID string) *e2a.Envelope {
	subj, err := subjects.Request("x", requestID)
	if err != nil {
		return nil
	}
	pool, _, err := subjects.ParseRequest(subj)
	if err != nil {
		return nil
	}
	i := strings.Index(subj, "."+pool+".")
	filter := subj[:i] + ".*." + subj[i+len(pool)+2:]
	m, err := st.GetLastMsgForSubject(ctx, filter)
	if err != nil {
		return nil
	}
	env, err := e2a.FromJSON(m.Data)
	if err != nil {
		return nil
	}
	return env
}

// acpPassThrough publishes a method the pipeline does not answer itself
// and answers with the request's final frame.
func (s *Server) acpPassThrough(rep rpcReply, in rpcIn, p Principal, res *normalizer.Result, req *Request) {
	env := res.Envelope
	acc, ok := s.publishRPC(rep, in, p, res.Pool, env)
	if !ok || req.IsNotification() {
		return
	}
	var final *e2a.Response
	err := egress.Replay(in.ctx, s.nc, acc.RequestID, 0, func(f egress.Frame) error {
		if f.Response.IsFinal {
			final = f.Response
		}
		return nil
	}, egress.WithoutRequestCheck())
	if err != nil || final == nil {
		if in.ctx.Err() != nil {
			return
		}
		rep.Error(&Error{Code: jsonrpc.CodeInternalError, Message: "Internal error: no answer from the agent",
			Data: map[string]any{"retryable": true, "request_id": acc.RequestID}})
		return
	}
	if final.ResponseKind == e2a.KindComplete {
		c, _ := final.Complete()
		result := c.Result
		if result == nil {
			result = map[string]any{}
		}
		rep.Result(result)
		return
	}
	if resp, ok := egress.E2AResponseToACPJSONRPCResponse(final); ok {
		if resp.Error != nil {
			rep.Error(&Error{Code: resp.Error.Code, Message: resp.Error.Message, Data: resp.Error.Data})
			return
		}
		rep.Result(resp.Result)
		return
	}
	rep.Result(map[string]any{})
}
