package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// Name is the protocol's name in the registry and in metric labels.
const Name = "acp"

// Path is the HTTP endpoint: POST only.
const Path = "/acp"

// ProtocolVersion is the ACP protocol version this front door speaks.
const ProtocolVersion = 1

// MethodLogout is ACP's logout (answered locally).
const MethodLogout = acpsdk.AgentMethodLogout

// Methods are the ACP methods the front door answers itself; any other
// method the normalizer accepts is passed to the agent pool.
var Methods = []host.Method{
	{Name: e2a.ACPInitialize}, {Name: e2a.ACPAuthenticate}, {Name: MethodLogout},
	{Name: e2a.ACPSessionNew}, {Name: e2a.ACPSessionLoad, Streaming: true},
	{Name: e2a.ACPSessionPrompt, Streaming: true}, {Name: e2a.ACPSessionCancel},
}

// CancelRequest is the notification that cancels one request in flight
// over stdio.
const CancelRequest = "$/cancel_request"

// MetaHistoryExpired is the key (value true) of session/load's result
// _meta when the replay is not the session's whole history: part of it
// aged out of the hot streams, or the record no longer lists its oldest
// turns (replaySession). The same key marks such an A2A task
// (protocols/a2a.MetaHistoryExpired). The whole history is in the audit
// copy (`e2a replay <request id>`).
const MetaHistoryExpired = "e2a_history_expired"

// kindSessionConfig keys the cwd and MCP servers of a session in the task
// store, beside the session's record.
const kindSessionConfig = "acp_session"

// sessionConfig is what session/new (or session/load) said about the
// client's environment; secret values of MCP servers are removed.
type sessionConfig struct {
	Cwd                   string   `json:"cwd"`
	McpServers            []any    `json:"mcpServers"`
	AdditionalDirectories []string `json:"additionalDirectories,omitempty"`
}

// Endpoint is the JSON-RPC endpoint of ACP over h, for the registry:
// POST /acp and stdio.
func Endpoint(h host.RPCHost) host.RPCEndpoint {
	f := &frontDoor{h: h}
	return host.RPCEndpoint{Protocol: Name, Refuse: Refuse, Streaming: Streaming, Metric: Label, Serve: f.serve, Peek: peek,
		Cancels: Cancels, Open: Open,
		Lines: &host.Lines{CancelMethod: CancelRequest,
			Cancelled: &jsonrpc.Error{Code: jsonrpc.CodeACPRequestCancelled, Message: "Request cancelled"},
			Classify:  classify}}
}

// Open reports ACP's method answered over HTTP without a credential
// where auth requires one (host.RPCEndpoint.Open): initialize, which
// publishes nothing and reads no session, and whose result's authMethods
// are how an ACP client learns to authenticate (then authenticate, then
// sessions, each with the credential).
func Open(method string) bool { return method == e2a.ACPInitialize }

// Cancels reports ACP's method that cancels the caller's requests,
// session/cancel (host.RPCEndpoint.Cancels).
func Cancels(method string) bool { return method == e2a.ACPSessionCancel }

// Refuse writes a refusal as a JSON-RPC error (id null) with the HTTP
// status, using ACP's "authentication required" code for 401.
func Refuse(w http.ResponseWriter, f host.Refusal) {
	if f.RPCCode == jsonrpc.CodeAuthentication {
		f.RPCCode = jsonrpc.CodeACPAuthRequired
	}
	host.RefuseJSONRPC(w, nil, f)
}

// peek is the endpoint's Peek: nothing is diverted, and the gate's
// refusals over HTTP (a missing or refused credential, a rate limit)
// answer the id of the body's call when it is readable (not a batch, a
// valid JSON-RPC id), as Refuse does otherwise, so that the client's
// call returns instead of waiting for an id that never comes.
func peek(body []byte) (http.Handler, host.Refuse) {
	return nil, func(w http.ResponseWriter, f host.Refusal) {
		var head struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(body, &head) != nil || !jsonrpc.ValidID(head.ID) {
			head.ID = nil
		}
		if f.RPCCode == jsonrpc.CodeAuthentication {
			f.RPCCode = jsonrpc.CodeACPAuthRequired
		}
		host.RefuseJSONRPC(w, head.ID, f)
	}
}

// method returns the method of the table.
func method(name string) (host.Method, bool) {
	for _, m := range Methods {
		if m.Name == name {
			return m, true
		}
	}
	return host.Method{}, false
}

// Streaming reports whether method is answered as a stream (and so cannot
// be batched).
func Streaming(name string) bool {
	m, ok := method(name)
	return ok && m.Streaming
}

// Label bounds a method name for a metric label: a method of [Methods] or
// of ACP's schema as is, "_ext" for an extension method, "other" for
// anything else.
func Label(name string) string {
	if _, ok := method(name); ok {
		return name
	}
	if strings.HasPrefix(name, "_") {
		return "_ext"
	}
	if normalizer.IsACPMethod(name) {
		return name
	}
	return "other"
}

// classify is what stdio needs to know of a call before it runs it: its
// session is the one the normalizer reads (sessionId, else session_id).
// Read as sessionId alone, a prompt and a session/cancel naming their
// sessions as session_id were both of session "", and the cancel of one
// session cancelled the other's prompt.
func classify(name string, params json.RawMessage) host.LineCall {
	var p map[string]any
	_ = json.Unmarshal(params, &p)
	return host.LineCall{Publishes: publishes(name), Session: normalizer.ACPSessionID(p),
		Turn: name == e2a.ACPSessionPrompt, CancelsTurns: name == e2a.ACPSessionCancel}
}

// publishes reports whether the front door publishes a request for method
// (rather than answering it from the task store).
func publishes(name string) bool {
	switch name {
	case "", e2a.ACPInitialize, e2a.ACPAuthenticate, MethodLogout, e2a.ACPSessionNew, e2a.ACPSessionLoad,
		e2a.ACPSessionCancel, acpsdk.AgentMethodSessionList, acpsdk.AgentMethodSessionFork, acpsdk.AgentMethodSessionResume,
		acpsdk.AgentMethodSessionClose, CancelRequest:
		return false
	}
	return true
}

// notImplemented are the ACP methods answered -32601 whatever their
// params: session management the pipeline owns, and the mode, model and
// config-option setters of capabilities session/new never advertises.
var notImplemented = map[string]bool{
	acpsdk.AgentMethodSessionList: true, acpsdk.AgentMethodSessionFork: true, acpsdk.AgentMethodSessionResume: true,
	acpsdk.AgentMethodSessionClose: true, acpsdk.AgentMethodSessionSetMode: true, acpsdk.AgentMethodSessionSetModel: true,
	acpsdk.AgentMethodSessionSetConfigOption: true,
}

// frontDoor answers ACP calls over the host.
type frontDoor struct{ h host.RPCHost }

// serve answers one ACP request; for a notification (no id) it acts but
// writes nothing worth reading and never waits for an agent.
func (d *frontDoor) serve(rep host.Reply, in host.Call, c host.RPCCaller, req *jsonrpc.Request) {
	nin := c.Input(in, req)
	if notImplemented[req.Method] {
		rep.Error(jsonrpc.MethodNotFound(req.Method))
		return
	}
	res, err := d.h.Normalizer().FromACP(nin)
	if err != nil {
		rep.Error(&jsonrpc.Error{Code: normalizer.JSONRPCCode(err), Message: egress.ClientMessage(err)})
		return
	}
	switch req.Method {
	case e2a.ACPInitialize:
		d.initialize(rep, in, req, nin, res)
	case e2a.ACPAuthenticate:
		d.authenticate(rep, in, req, nin.Principal)
	case MethodLogout:
		rep.Result(map[string]any{})
	case e2a.ACPSessionNew:
		d.sessionNew(rep, in, c, res, req)
	case e2a.ACPSessionLoad:
		d.sessionLoad(rep, in, c, res, req)
	case e2a.ACPSessionPrompt:
		d.prompt(rep, in, c, res, req)
	case e2a.ACPSessionCancel:
		d.cancel(rep, in, c, res, req)
	default:
		if res.Op != normalizer.OpSubmit {
			rep.Error(jsonrpc.MethodNotFound(req.Method))
			return
		}
		d.passThrough(rep, in, c, res, req)
	}
}

// authMethods lists one ACP auth method per configured scheme, described
// for the transport of in (authDescription).
func (d *frontDoor) authMethods(in host.Call) []map[string]any {
	out := []map[string]any{}
	for _, m := range d.h.AuthMethods() {
		out = append(out, map[string]any{"id": m.ID, "name": m.Name, "description": authDescription(in, m)})
	}
	return out
}

// authDescription is how the client of in gives method m's credential:
// over stdio, where an editor sends no headers, in the environment it
// starts `e2a acp` with (m.StdioDescription); an editor showed "send the
// key in the X-Api-Key header" to a user who could do no such thing.
func authDescription(in host.Call, m host.AuthMethod) string {
	if in.Request == nil && m.StdioDescription != "" {
		return m.StdioDescription
	}
	return m.Description
}

// initialize answers ACP's initialize for the pool the caller's prompts
// go to (promptPool): its promptCapabilities are that pool's
// (promptCapabilities).
func (d *frontDoor) initialize(rep host.Reply, in host.Call, req *jsonrpc.Request, nin normalizer.Input, res *normalizer.Result) {
	var params struct {
		ProtocolVersion json.RawMessage `json:"protocolVersion"`
	}
	_ = json.Unmarshal(req.Params, &params)
	if _, err := strconv.ParseUint(string(params.ProtocolVersion), 10, 16); err != nil {
		rep.Error(jsonrpc.InvalidParams("protocolVersion must be an integer"))
		return
	}
	rep.Result(map[string]any{
		"protocolVersion": ProtocolVersion,
		"agentCapabilities": map[string]any{
			"loadSession":        true,
			"promptCapabilities": promptCapabilities(d.poolModes(in.Ctx, d.promptPool(nin, res))),
			"mcpCapabilities":    mcpCapabilities(),
		},
		"authMethods": d.authMethods(in),
		"agentInfo":   map[string]any{"name": "e2a-pipeline", "title": "E2A Pipeline", "version": "1"},
	})
}

// mcpCapabilities is initialize's agentCapabilities.mcpCapabilities: the
// transports of MCP servers, beyond stdio (which ACP requires of every
// agent), that session/new and session/load accept (checkMCPServers) and
// every prompt hands to the agent: http and sse. An "acp" server (MCP
// over ACP, unstable in the schema) is not advertised, and refused
// (checkMCPServers): its agent would reach it through the client's ACP
// connection, which the door does not relay.
func mcpCapabilities() map[string]any { return map[string]any{"http": true, "sse": true} }

// authenticate accepts a configured method the request carrying it
// authenticated with (p.Scheme; it has passed auth): one that came without
// that credential (the anonymous caller of optional auth) gets ACP's
// auth_required, since what it does next stays the anonymous principal's,
// shared by every caller without a credential.
func (d *frontDoor) authenticate(rep host.Reply, in host.Call, req *jsonrpc.Request, p *normalizer.Principal) {
	var params struct {
		MethodID string `json:"methodId"`
	}
	_ = json.Unmarshal(req.Params, &params)
	if params.MethodID == "" {
		rep.Error(jsonrpc.InvalidParams("methodId is required"))
		return
	}
	for _, m := range d.h.AuthMethods() {
		if m.ID != params.MethodID {
			continue
		}
		if p != nil && p.Scheme != "" && p.Scheme != m.ID {
			rep.Error(&jsonrpc.Error{Code: jsonrpc.CodeACPAuthRequired,
				Message: "authentication required: " + m.Name + ": " + authDescription(in, m)})
			return
		}
		rep.Result(map[string]any{})
		return
	}
	rep.Error(jsonrpc.InvalidParams("unknown auth method " + jsonrpc.QuoteForMessage(params.MethodID)))
}

// absolutePath reports whether p is an absolute path on the client's
// machine, whichever system that is: POSIX /…, or Windows C:\…, C:/…
// or a UNC \\server\share. ACP requires cwd and additional
// directories to be absolute; the pipeline never opens them, so the
// server's own filepath rules do not apply.
func absolutePath(p string) bool {
	switch {
	case strings.HasPrefix(p, "/"), strings.HasPrefix(p, `\\`):
		return true
	case len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/'):
		c := p[0] | 0x20
		return c >= 'a' && c <= 'z'
	}
	return false
}

// readSessionConfig reads cwd, mcpServers and additionalDirectories of
// session/new or session/load params. cwd is required when need is true.
func readSessionConfig(raw json.RawMessage, need bool) (*sessionConfig, *jsonrpc.Error) {
	var params struct {
		Cwd                   *string         `json:"cwd"`
		McpServers            json.RawMessage `json:"mcpServers"`
		AdditionalDirectories []string        `json:"additionalDirectories"`
	}
	if err := json.Unmarshal(raw, &params); err != nil && len(raw) > 0 {
		return nil, jsonrpc.InvalidParams(sessionConfigTypeError(err))
	}
	if params.Cwd == nil || *params.Cwd == "" {
		if need {
			return nil, jsonrpc.InvalidParams("cwd is required")
		}
		return nil, nil
	}
	if !absolutePath(*params.Cwd) {
		return nil, jsonrpc.InvalidParams("cwd must be an absolute path")
	}
	for _, dir := range params.AdditionalDirectories {
		if !absolutePath(dir) {
			return nil, jsonrpc.InvalidParams("additionalDirectories must be absolute paths")
		}
	}
	cfg := &sessionConfig{Cwd: *params.Cwd, McpServers: []any{}, AdditionalDirectories: params.AdditionalDirectories}
	if len(params.McpServers) > 0 && string(params.McpServers) != "null" {
		if err := json.Unmarshal(params.McpServers, &cfg.McpServers); err != nil {
			return nil, jsonrpc.InvalidParams("mcpServers must be an array")
		}
		if e := checkMCPServers(params.McpServers); e != nil {
			return nil, e
		}
	}
	// The secrets of MCP servers: every value of their environment
	// variables and HTTP headers, and secret args (--token X), by the
	// normalizer's rule; names stay.
	normalizer.StripMCPServers(cfg.McpServers)
	return cfg, nil
}

// sessionConfigTypeError is the message of a session/new or session/load
// params object readSessionConfig could not decode: the param of the wrong
// JSON type, named (mcpServers, read raw, is checked after).
func sessionConfigTypeError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		switch strings.SplitN(te.Field, ".", 2)[0] {
		case "cwd":
			return "cwd must be a string"
		case "additionalDirectories":
			return "additionalDirectories must be an array of strings"
		}
	}
	return "params must be an object with cwd a string, mcpServers an array and additionalDirectories an array of strings"
}

// checkMCPServers checks each of mcpServers (a JSON array) as the ACP
// schema's McpServer: by its type, http or sse {name, url, headers}, else
// stdio (no type, or "stdio") {name, command, args, env}, every member there
// (the lists may be empty), the names and the command or URL not empty.
// An entry that is none ([1], "fs", {}, null, a name alone) was stored
// with the session and sent to the agent with every prompt; the SDK's own
// decoding takes anything with a name as an http server. An acp server
// {name, id} (MCP over ACP) is refused, naming it: initialize does not
// advertise it (mcpCapabilities), and by ACP a client sends only what the
// agent advertises; its agent would reach it through the client's ACP
// connection, which the door does not relay, so it was stored and handed
// to the agent with every prompt, unreachable.
func checkMCPServers(raw json.RawMessage) *jsonrpc.Error {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return jsonrpc.InvalidParams("mcpServers must be an array")
	}
	for i, it := range items {
		var m struct {
			Type    *string           `json:"type"`
			Name    string            `json:"name"`
			Command string            `json:"command"`
			URL     string            `json:"url"`
			Args    *[]string         `json:"args"`
			Env     *[]map[string]any `json:"env"`
			Headers *[]map[string]any `json:"headers"`
		}
		err := json.Unmarshal(it, &m)
		// The stdio transport has no type or names it: the schema's stdio
		// branch (McpServerStdio) does not forbid the member, and
		// acp-go-sdk reads "type":"stdio" as that branch.
		stdio := m.Type == nil || *m.Type == "stdio"
		var missing string
		switch {
		case err != nil || string(bytes.TrimSpace(it)) == "null":
			missing = "an object"
		case m.Name == "":
			missing = "name"
		case stdio && (m.Command == "" || m.Args == nil || m.Env == nil):
			missing = "command, args and env (a stdio server)"
		case m.Type != nil && (*m.Type == "http" || *m.Type == "sse") && (m.URL == "" || m.Headers == nil):
			missing = "url and headers (an " + *m.Type + " server)"
		case m.Type != nil && *m.Type == "acp":
			return jsonrpc.InvalidParams(fmt.Sprintf("mcpServers[%d] %q: an MCP server of type acp (MCP over ACP) is not supported: "+
				"its agent would reach it through this ACP connection, which the pipeline does not relay (mcpCapabilities: http, sse)", i, m.Name))
		case !stdio && *m.Type != "http" && *m.Type != "sse":
			missing = "a type of stdio, http or sse (or none: stdio)"
		}
		if missing != "" {
			return jsonrpc.InvalidParams(fmt.Sprintf("mcpServers[%d] needs %s", i, missing))
		}
	}
	return nil
}

// NewSessionID returns a new session id (a UUIDv7).
func NewSessionID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

func (d *frontDoor) sessionNew(rep host.Reply, in host.Call, c host.RPCCaller, res *normalizer.Result, req *jsonrpc.Request) {
	cfg, rerr := readSessionConfig(req.Params, true)
	if rerr != nil {
		rep.Error(rerr)
		return
	}
	if req.IsNotification() {
		return // nobody would learn the session id
	}
	id := NewSessionID()
	if err := d.putSessionConfig(in.Ctx, c, id, cfg); err != nil {
		d.storeFailed(rep, req, "session store", err)
		return
	}
	if err := c.CreateSession(in.Ctx, normalizer.ProtocolACP, id, res.Pool); err != nil {
		d.storeFailed(rep, req, "session store", err)
		return
	}
	rep.Result(map[string]any{"sessionId": id})
}

func (d *frontDoor) storeFailed(rep host.Reply, req *jsonrpc.Request, what string, err error) {
	if errors.Is(err, context.Canceled) {
		return // the caller went away or cancelled the call: nothing to answer
	}
	d.h.Logger().Warn("acp: "+what+" failed", "method", req.Method, "err", err)
	rep.Refuse(host.Refusal{Status: http.StatusServiceUnavailable, RPCCode: jsonrpc.CodeInternalError,
		Message: "the pipeline could not store the session; retry later", Data: map[string]any{"retryable": true},
		RetryAfter: time.Second})
}

func (d *frontDoor) putSessionConfig(ctx context.Context, c host.RPCCaller, id string, cfg *sessionConfig) error {
	data, _ := json.Marshal(cfg)
	return c.PutSessionData(ctx, kindSessionConfig, id, data)
}

func (d *frontDoor) sessionConfig(ctx context.Context, c host.RPCCaller, id string) *sessionConfig {
	data, err := c.SessionData(ctx, kindSessionConfig, id)
	if err != nil {
		return nil
	}
	var cfg sessionConfig
	if json.Unmarshal(data, &cfg) != nil {
		return nil
	}
	return &cfg
}

// session returns the session record of the caller, answering the error
// itself (when the request has an id) and returning nil otherwise.
func (d *frontDoor) session(rep host.Reply, in host.Call, c host.RPCCaller, req *jsonrpc.Request, id string, a tenant.Access) *host.Session {
	rec, err := c.Session(in.Ctx, normalizer.ProtocolACP, id, a)
	if err != nil {
		if errors.Is(err, host.ErrSessionNotFound) {
			rep.Error(&jsonrpc.Error{Code: jsonrpc.CodeACPResourceNotFound, Message: "Resource not found: session " + jsonrpc.QuoteForMessage(id),
				Data: map[string]any{"sessionId": id}})
			return nil
		}
		d.storeFailed(rep, req, "session lookup", err)
		return nil
	}
	return rec
}

// prompt publishes a session/prompt and streams its answer.
func (d *frontDoor) prompt(rep host.Reply, in host.Call, c host.RPCCaller, res *normalizer.Result, req *jsonrpc.Request) {
	at := received(in)
	env := res.Envelope
	rec := d.session(rep, in, c, req, env.SessionID, tenant.Write)
	if rec == nil {
		return
	}
	liftE2AParams(env)
	if env.Trace == nil {
		env.Trace = metaTrace(env.Params)
	}
	if e := d.checkPromptMedia(in.Ctx, res.Pool, env); e != nil {
		rep.Error(e)
		return
	}
	if cfg := d.sessionConfig(in.Ctx, c, env.SessionID); cfg != nil {
		if _, ok := env.Params["cwd"]; !ok {
			env.Params["cwd"] = cfg.Cwd
		}
		if _, ok := env.Params["mcpServers"]; !ok {
			env.Params["mcpServers"] = cfg.McpServers
		}
	}
	// A turn of the session: recorded first, run after the session's
	// earlier prompt (a client that sends a prompt before the last one
	// ended gets its answer after that one's). A call's answer takes a
	// stream slot; its frames, streamed in this call, are subscribed to
	// before the publish, so a new prompt's stream opens without reading
	// E2A_RESPONSES (egress.ExpectStream).
	answered := !req.IsNotification()
	// The envelope's timestamp is when the prompt was received: a
	// session/cancel received after it cancels it, one received before it
	// leaves it running (host.Session.CancelBefore).
	env.Timestamp = e2a.FormatTime(at)
	// A cancel of the session received after the prompt may be handled
	// before the prompt is recorded (two HTTP requests): the prompt is then
	// cancelled once published, by its time (host.Turn.Received).
	sub, err := c.Submit(in.Ctx, host.Submission{Pool: res.Pool, Envelope: env, Slot: answered, Prepare: answered && rep.Stream() != nil,
		Turn: &host.Turn{Task: host.Task{Session: host.Session{ID: env.SessionID, Protocol: normalizer.ProtocolACP, Pool: res.Pool}},
			Session: true, Received: at}})
	if !host.ReplySubmitted(rep, sub, err) {
		return
	}
	defer sub.Done()
	acc := sub.Accepted
	in.Ctx, in.Request = sub.Context(), sub.Answering(in.Request)
	w := rep.Stream()
	if w == nil {
		return // a notification: published only
	}
	params := Params{JSONRPCID: req.ID, SessionID: env.SessionID}
	// The calls the session's earlier turns left pending are read at the
	// turn's first frame: its agent ran once the turn before it had
	// ended (agent/turns.go), so that turn's frames are stored by then.
	pending := func() openCalls { return d.leftPending(in.Ctx, rec) }
	newRenderer := func(o *render.Output) render.Renderer { return &renderer{o: o, p: params, pending: pending} }
	if in.Request == nil {
		// stdio: NDJSON lines, from the first frame.
		d.h.ServeFrom(in.Ctx, w, acc.RequestID, Format, 0, newRenderer)
		return
	}
	if egress.Preferred(in.Request, "application/x-ndjson", "text/event-stream") == "text/event-stream" {
		params.SSE = true
	}
	d.h.Serve(w, in.Request, acc.RequestID, Format, newRenderer)
}

// maxPendingTurns bounds the turns leftPending reads back: a session's
// turns interrupted one after another, each leaving its calls pending.
const maxPendingTurns = 8

// leftPending returns the tracker of a new turn of session rec (as read
// before the turn was recorded) holding the tool calls its earlier turns
// left pending (openCalls.end): those
// open at the end of the turn before it when that turn ended interrupted,
// and so on back, as session/load's replaySession carries them. The turn
// ends them: with its response, or failed at its end when it never
// answers them. A turn of another principal, or with no frame stored, is
// passed over as the replay passes it over; one not ended yet, or ended
// otherwise than interrupted, leaves none. A turn costs one direct get of
// its last frame unless it ended interrupted (an ACP prompt read the
// session again and every frame of the turn before it: 0.26 ms of CPU and
// 600 allocations more per prompt in `e2a bench --protocol acp`).
func (d *frontDoor) leftPending(ctx context.Context, rec *host.Session) openCalls {
	ids := rec.RequestIDs       // read before this turn was recorded: the turns before it
	var chain [][]*e2a.Response // the interrupted turns, newest first
	for i := len(ids) - 1; i >= 0 && len(ids)-i <= maxPendingTurns; i-- {
		frames, own := d.interruptedTurn(ctx, rec, ids[i])
		if !own {
			continue
		}
		if frames == nil {
			break
		}
		chain = append(chain, frames)
	}
	var open openCalls
	for _, frames := range slices.Backward(chain) {
		calls := open.next()
		for _, r := range frames {
			ups, _ := calls.updates(r)
			for _, u := range ups {
				calls.track(u)
			}
		}
		calls.end(frames[len(frames)-1], nil) // interrupted: keeps them pending
		open = calls
	}
	return open.next()
}

// interruptedTurn returns the stored frames of request id when its last
// is a final frame asking for input or auth (Interrupt), nil otherwise;
// own is false for a request the replay passes over (replaySession: not
// the session's own, or no frame stored).
func (d *frontDoor) interruptedTurn(ctx context.Context, rec *host.Session, id string) (frames []*e2a.Response, own bool) {
	// Its last frame first (one direct get): a turn that ended otherwise
	// than interrupted, the common case, costs no more than that.
	last, err := d.h.Last(ctx, id)
	switch {
	case errors.Is(err, egress.ErrNotFound):
		return nil, false
	case err != nil:
		return nil, true
	}
	if _, _, interrupted := last.Interrupt(); !interrupted {
		// Judged by its frames alone (no read of its envelope for every
		// prompt): a turn whose frames name another principal is passed
		// over.
		return nil, last.UserID == "" || rec.OwnsFrames(last.UserID)
	}
	err = d.h.Stored(ctx, id, func(r *e2a.Response) error {
		frames = append(frames, r)
		return nil
	})
	if errors.Is(err, egress.ErrNotFound) || err == nil && len(frames) == 0 {
		return nil, false
	}
	if err != nil {
		return nil, true
	}
	last = frames[len(frames)-1]
	env, err := d.h.Envelope(ctx, id)
	switch {
	case err != nil:
		return nil, true
	case env != nil:
		return frames, rec.Owns(env)
	}
	return frames, rec.OwnsFrames(last.UserID)
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

// metaTrace is the W3C trace context of a prompt's params._meta: its
// traceparent and tracestate, the root keys ACP reserves for it (its
// extensibility section), the only carrier a client over stdio has; nil
// when there is none or its traceparent is invalid, its tracestate
// dropped outside the W3C limits (e2a.CleanTrace, as every door checks a
// traceparent header, which wins over it).
func metaTrace(params map[string]any) *e2a.TraceContext {
	meta, _ := params["_meta"].(map[string]any)
	tp, _ := meta["traceparent"].(string)
	if tp == "" {
		return nil
	}
	ts, _ := meta["tracestate"].(string)
	return e2a.CleanTrace(&e2a.TraceContext{Traceparent: tp, Tracestate: ts})
}

// cancel cancels the session's prompts not ended: the running one and any
// queued after it (turns of a session run one after another). The worker
// then writes each one's final cancelled frame, which ends its pending
// session/prompt with stopReason "cancelled".
//
// A prompt received before the cancel may not be recorded yet (over HTTP
// the prompt and the cancel are two requests, handled concurrently, maybe
// by two replicas): the session is first marked cancelled for the prompts
// received before this cancel (host.SessionCanceler), a compare-and-set
// that orders the mark with the prompts' appends to the session's record.
// A prompt appended before the mark is in the record the mark returns,
// and cancelled here; one appended after it reads the mark and is
// cancelled once published, if it was received before the cancel. A
// prompt received after the cancel runs.
func (d *frontDoor) cancel(rep host.Reply, in host.Call, c host.RPCCaller, res *normalizer.Result, req *jsonrpc.Request) {
	at := received(in)
	rec := d.session(rep, in, c, req, res.Envelope.SessionID, tenant.Write)
	if rec == nil {
		return
	}
	if sc, ok := c.(host.SessionCanceler); ok {
		marked, err := sc.CancelSession(in.Ctx, normalizer.ProtocolACP, rec.ID, at)
		if errors.Is(err, host.ErrSessionNotFound) {
			// Gone, or another principal's, since it was read.
			rep.Error(&jsonrpc.Error{Code: jsonrpc.CodeACPResourceNotFound, Message: "Resource not found: session " + jsonrpc.QuoteForMessage(rec.ID),
				Data: map[string]any{"sessionId": rec.ID}})
			return
		}
		if err != nil {
			d.cancelFailed(rep, rec, err)
			return
		}
		rec = marked
	}
	if len(rec.RequestIDs) > 0 {
		if err := d.h.CancelTurns(in.Ctx, rec); err != nil {
			d.cancelFailed(rep, rec, err)
			return
		}
	}
	rep.Result(nil)
}

// cancelFailed answers a session/cancel that could not be delivered.
func (d *frontDoor) cancelFailed(rep host.Reply, rec *host.Session, err error) {
	d.h.Logger().Warn("acp: cancel failed", "session_id", rec.ID, "request_id", rec.LastRequest(), "err", err)
	rep.Error(jsonrpc.InternalError("the cancel could not be delivered; retry"))
}

// received is when the call was received: the transport's time
// (host.Call.Received: HTTP's before admission, stdio's when its line was
// read, in the order read), else now.
func received(in host.Call) time.Time {
	if in.Received.IsZero() {
		return time.Now()
	}
	return in.Received
}

// stream writes the JSON-RPC messages of one streamed answer: NDJSON
// lines, or SSE events when the client prefers text/event-stream.
type stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	sse     bool
	started bool
	// timeout bounds each write (host.Answerer.WriteTimeout): a client
	// that stopped reading held the replay, and its stream slot, for as
	// long as its connection stayed open.
	timeout time.Duration
}

func newStream(w http.ResponseWriter, header http.Header, timeout time.Duration) *stream {
	// As session/prompt chooses: by the Accept header's q-values, NDJSON
	// on a tie or when neither is listed (a Contains test answered NDJSON
	// to a client preferring SSE that accepted NDJSON too).
	sse := egress.Preferred(&http.Request{Header: header}, "application/x-ndjson", "text/event-stream") == "text/event-stream"
	return &stream{w: w, rc: http.NewResponseController(w), sse: sse, timeout: timeout}
}

func (st *stream) emit(v any) error {
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
	if st.timeout > 0 {
		_ = st.rc.SetWriteDeadline(time.Now().Add(st.timeout))
	}
	if _, err := st.w.Write(b); err != nil {
		return err
	}
	_ = st.rc.Flush()
	return nil
}

// sessionLoad replays a session's history, then answers a
// LoadSessionResponse.
func (d *frontDoor) sessionLoad(rep host.Reply, in host.Call, c host.RPCCaller, res *normalizer.Result, req *jsonrpc.Request) {
	id := res.Envelope.SessionID
	cfg, rerr := readSessionConfig(req.Params, false)
	if rerr != nil {
		rep.Error(rerr)
		return
	}
	rec, store := d.loadTarget(rep, in, c, req, id, cfg != nil)
	if rec == nil || req.IsNotification() {
		return
	}
	if store {
		if err := d.putSessionConfig(in.Ctx, c, id, cfg); err != nil {
			d.h.Logger().Warn("acp: session config update failed", "session_id", id, "err", err)
		}
	}
	w := rep.Stream()
	if w == nil {
		return
	}
	release, ok := c.StreamSlot(rep)
	if !ok {
		return
	}
	defer release()
	st := newStream(w, in.Header, d.h.WriteTimeout())
	emit := func(u acpsdk.SessionUpdate) error { return st.emit(notification(id, u)) }
	whole, err := d.replaySession(in.Ctx, rec, emit)
	if err != nil {
		if in.Ctx.Err() != nil {
			return
		}
		d.h.Logger().Warn("acp: session replay failed", "session_id", id, "err", err)
		_ = st.emit(jsonrpc.ErrorResponse(req.ID, jsonrpc.InternalError("the session history could not be read")))
		return
	}
	var loaded acpsdk.LoadSessionResponse
	if !whole {
		loaded.Meta = map[string]any{MetaHistoryExpired: true}
	}
	_ = st.emit(jsonrpc.ResultResponse(req.ID, loaded))
}

// loadTarget returns the session a session/load reads, answering the
// error itself when there is none, and whether the load's settings (cwd,
// mcpServers: settings is true when it has them) replace the session's:
// when the caller may write the session. A caller who may only read it
// (the audit role) gets the replay, the session's settings left as they
// are. Every conforming client sends cwd and mcpServers (the schema's
// LoadSessionRequest requires both), and asking write access whenever
// they came answered every auditor's load -32002.
func (d *frontDoor) loadTarget(rep host.Reply, in host.Call, c host.RPCCaller, req *jsonrpc.Request, id string, settings bool) (*host.Session, bool) {
	if settings {
		rec, err := c.Session(in.Ctx, normalizer.ProtocolACP, id, tenant.Write)
		if err == nil {
			return rec, true
		}
		if !errors.Is(err, host.ErrSessionNotFound) {
			d.storeFailed(rep, req, "session lookup", err)
			return nil, false
		}
	}
	return d.session(rep, in, c, req, id, tenant.Read), false
}

// replaySession calls emit with the session/update notifications of the
// session's history: each prompt's content blocks as user_message_chunk,
// then the updates of the frames the agent has written. A prompt still
// running (or queued behind it) is followed to its end: its updates are
// emitted as they are written, and the load answers once every turn has
// ended (it answered with what was stored, and the rest of the prompt
// reached the client on no call: an editor reloading a session after its
// e2a acp or serve replica died mid-prompt showed the answer cut off). A
// request that is not the session's own (host.Session.Owns: by its
// envelope, else by the user_id of its frames) is left out.
//
// History that aged out of the hot streams is left out too, and whole is
// false then (session/load's MetaHistoryExpired): turns the record no
// longer lists (host.Session.Dropped), a prompt whose envelope E2A_REQUESTS
// no longer holds, a turn whose first frames E2A_RESPONSES dropped (its
// first stored frame is past 0: the rest is replayed), and a turn without
// a frame before one with frames (turns run one after another, so it
// ended, and its frames aged out). A session/load failed whole ("could
// not be read") once a turn's first frames had aged out.
func (d *frontDoor) replaySession(ctx context.Context, rec *host.Session, emit func(acpsdk.SessionUpdate) error) (whole bool, err error) {
	whole = rec.Dropped == 0
	var open openCalls  // the calls the turns so far left pending (openCalls.end)
	framesGone := false // a turn without a frame was met since the last with frames
	for _, id := range rec.RequestIDs {
		env, err := d.h.Envelope(ctx, id)
		if err != nil {
			return false, err
		}
		if env != nil && !rec.Owns(env) {
			continue
		}
		if env != nil {
			if err := emitPrompt(env, emit); err != nil {
				return false, err
			}
		}
		calls := open.next()
		first, err := d.replayTurn(ctx, rec, id, env != nil, &calls, emit)
		if err != nil {
			return false, err
		}
		open = calls
		if first < 0 {
			framesGone = true
			continue
		}
		if first > 0 || framesGone || env == nil {
			whole = false
		}
		framesGone = false
	}
	return whole, nil
}

// emitPrompt emits env's prompt as user_message_chunk updates.
func emitPrompt(env *e2a.Envelope, emit func(acpsdk.SessionUpdate) error) error {
	blocks, _ := normalizer.MergeParamsToACPPrompt(env)["prompt"].([]any)
	for _, b := range blocks {
		data, _ := json.Marshal(b)
		var cb acpsdk.ContentBlock
		if json.Unmarshal(data, &cb) != nil {
			continue
		}
		if err := emit(acpsdk.UpdateUserMessage(cb)); err != nil {
			return err
		}
	}
	return nil
}

// replayTurn emits the updates of request id's frames: those stored, then,
// when it is running (some frames stored, not its final one) and still
// stored (stored: its envelope was read), those written until its final
// frame. A request with no frame stored is not waited for: it may be a
// turn still queued, or one whose frames E2A_RESPONSES no longer holds
// (its age or byte limit), which would never end.
//
// calls holds the calls earlier turns left pending; the request's tool
// calls end as the live turn ended them (the renderer's openCalls, primed
// as leftPending primes it): at its final frame. A request with frames
// but no final one leaves none open (leftPending stops there). first is
// the sequence of the first frame emitted, -1 when none was: past 0 when
// the frames before it aged out of E2A_RESPONSES (host.Frames.Stored).
func (d *frontDoor) replayTurn(ctx context.Context, rec *host.Session, id string, stored bool, calls *openCalls, emit func(acpsdk.SessionUpdate) error) (first int64, err error) {
	first = -1
	last, final := int64(-1), false
	defer func() {
		if err == nil && last >= 0 && !final {
			*calls = openCalls{}
		}
	}()
	frame := func(r *e2a.Response) error {
		if r.Sequence <= last {
			return nil // already emitted (the follow reads from the start)
		}
		if !stored && !rec.OwnsFrames(r.UserID) {
			return errNotOwn
		}
		if first < 0 {
			first = r.Sequence
		}
		last, final = r.Sequence, r.IsFinal
		ups, _ := calls.updates(r)
		for _, u := range ups {
			calls.track(u)
		}
		if r.IsFinal {
			ups = append(ups, calls.end(r, nil)...)
		}
		for _, u := range ups {
			if err := emit(u); err != nil {
				return err
			}
		}
		return nil
	}
	err = d.h.Stored(ctx, id, frame)
	if errors.Is(err, errNotOwn) || errors.Is(err, egress.ErrNotFound) && !stored {
		return first, nil
	}
	if err != nil && !errors.Is(err, egress.ErrNotFound) {
		return first, err
	}
	if final || !stored || last < 0 {
		return first, nil
	}
	err = d.h.Replay(ctx, id, func(f render.Frame) error {
		r, derr := f.Decoded()
		if derr != nil {
			return derr
		}
		return frame(r)
	})
	if errors.Is(err, errNotOwn) {
		return first, nil
	}
	return first, err
}

// errNotOwn ends the replay of a request's frames that name another
// user_id than the session's (its envelope gone: replaySession).
var errNotOwn = errors.New("acp: another principal's request")

// passThrough publishes a method the pipeline does not answer itself and
// answers with the request's final frame. A call naming a session
// (params.sessionId or session_id: the envelope's session_id) is a call
// into it, for the session's agent to act on: the session must be one the
// caller may write, as for session/prompt (another principal's, or none,
// is ResourceNotFound, and nothing is published). Without the check any
// principal published an envelope naming another's session.
func (d *frontDoor) passThrough(rep host.Reply, in host.Call, c host.RPCCaller, res *normalizer.Result, req *jsonrpc.Request) {
	if id := res.Envelope.SessionID; id != "" && d.session(rep, in, c, req, id, tenant.Write) == nil {
		return
	}
	sub, err := c.Submit(in.Ctx, host.Submission{Pool: res.Pool, Envelope: res.Envelope})
	if !host.ReplySubmitted(rep, sub, err) || req.IsNotification() {
		return
	}
	defer sub.Done()
	acc := sub.Accepted
	var final *e2a.Response
	err = d.h.Replay(in.Ctx, acc.RequestID, func(f render.Frame) error {
		if f.Response.IsFinal {
			final = f.Response
		}
		return nil
	})
	if err != nil || final == nil {
		if in.Ctx.Err() != nil {
			return
		}
		rep.Error(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error: no answer from the agent",
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
	if resp, ok := E2AResponseToACPJSONRPCResponse(final); ok {
		if resp.Error != nil {
			rep.Error(&jsonrpc.Error{Code: resp.Error.Code, Message: resp.Error.Message, Data: resp.Error.Data})
			return
		}
		rep.Result(resp.Result)
		return
	}
	rep.Result(map[string]any{})
}
