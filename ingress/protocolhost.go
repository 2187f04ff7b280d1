package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/obs"
	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// The protocol packages' side of the front door: a protocol that is one
// package (protocols/<name>) is mounted from the registry, its routes built
// over protocolHost, the server as host.Host.

// mountProtocols mounts every protocol of the registry (WithProtocols) on
// mux, in one loop, by the roles its service implements:
// host.RouteServer's routes, each request counted in
// e2a_ingress_requests_total under the protocol's name and the route; a
// JSON-RPC endpoint (host.RPCServer, host.TaskRPCServer) at each of its
// HTTP paths (POST, served by serveRPC, counted under the protocol and the
// method); host.BindingServer's bindings at its first path (bindProtocols);
// host.CardServer's agent card (mountCard). Other methods on a path are
// 405, Allow naming the path's routes' methods (HEAD with GET: the mux
// serves a GET pattern's HEAD).
func (s *Server) mountProtocols(mux *http.ServeMux) {
	h := protocolHost{s: s}
	allow := map[string][]string{} // by path, in the order first routed
	var paths []string
	for _, p := range s.opts.protocols.All() {
		if pe, ok := endpointOf(h, p.Service); ok {
			s.mountRPC(mux, p, pe)
		}
		if b, ok := s.bound[p.Name]; ok {
			s.mountBindings(mux, p, b)
		}
		if _, ok := p.Service.(host.CardServer); ok {
			s.mountCard(mux, p)
		}
		rs, ok := p.Service.(host.RouteServer)
		if !ok {
			continue
		}
		for _, rt := range rs.Routes(h) {
			pattern := rt.Method + " " + rt.Path
			mux.Handle(pattern, s.counted(p.Name, pattern, s.bounded(rt.Handler)))
			if _, ok := allow[rt.Path]; !ok {
				paths = append(paths, rt.Path)
			}
			methods := []string{rt.Method}
			if rt.Method == http.MethodGet {
				methods = append(methods, http.MethodHead)
			}
			for _, m := range methods {
				if !slices.Contains(allow[rt.Path], m) {
					allow[rt.Path] = append(allow[rt.Path], m)
				}
			}
		}
	}
	for _, path := range paths {
		mux.HandleFunc(path, egress.MethodNotAllowed(allow[path]...))
	}
}

// endpointOf is the JSON-RPC endpoint of a protocol's service over h, if
// it serves one.
func endpointOf(h protocolHost, service any) (host.RPCEndpoint, bool) {
	switch sv := service.(type) {
	case host.TaskRPCServer:
		return sv.TaskEndpoint(h), true
	case host.RPCServer:
		return sv.RPCEndpoint(h), true
	}
	return host.RPCEndpoint{}, false
}

// mountRPC serves the JSON-RPC endpoint pe of p at each of p's HTTP paths
// ("stdio" is ServeACPStdio's).
func (s *Server) mountRPC(mux *http.ServeMux, p protocols.Protocol, pe host.RPCEndpoint) {
	e, peek := s.rpcEndpointOf(pe), pe.Peek
	for _, path := range p.Paths {
		if !strings.HasPrefix(path, "/") {
			continue
		}
		serve := s.bounded(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.servePeeked(w, r, e, peek) }))
		mux.Handle(http.MethodPost+" "+path, serve)
		// With a trailing slash too ("/a2a/"): httpx-based clients
		// post to "<url>/".
		mux.Handle(http.MethodPost+" "+path+"/{$}", serve)
		mux.HandleFunc(path, egress.MethodNotAllowed(http.MethodPost))
	}
}

// mountBindings serves b, p's bindings, at p's first path: JSON-RPC
// (POST, with a trailing slash too: httpx and the A2A TCK post to
// "<url>/") and the REST binding under it, counted in the requests metric
// under p's name split at its first dot ("a2a.v1": protocol a2a, route
// v1).
func (s *Server) mountBindings(mux *http.ServeMux, p protocols.Protocol, b host.Bindings) {
	path := p.Paths[0]
	protocol, route, _ := strings.Cut(p.Name, ".")
	rpc := s.counted(protocol, route, b.JSONRPC)
	if p.Name == s.v1name {
		rpc = s.v1rpc
	}
	rpc = s.bounded(rpc)
	mux.Handle("POST "+path, rpc)
	mux.Handle("POST "+path+"/{$}", rpc)
	mux.Handle(path+"/", s.counted(protocol, route, s.bounded(b.REST)))
	mux.HandleFunc(path, egress.MethodNotAllowed(http.MethodPost))
}

// bindProtocols builds the bindings of the registry's binding servers
// over the server, once; the first is A2A v1.0's, whose JSON-RPC handler
// also serves single v1.0 calls at /a2a (protocolHost.BindingRPC) and whose
// gRPC service is A2AGRPC's.
func (s *Server) bindProtocols() {
	s.bound = map[string]host.Bindings{}
	for _, p := range s.opts.protocols.All() {
		bs, ok := p.Service.(host.BindingServer)
		if !ok {
			continue
		}
		b := bs.Bindings(protocolHost{s: s})
		s.bound[p.Name] = b
		if s.v1name == "" {
			protocol, route, _ := strings.Cut(p.Name, ".")
			s.v1, s.v1name, s.v1rpc = b, p.Name, s.counted(protocol, route, b.JSONRPC)
		}
	}
	if s.v1rpc == nil {
		s.v1rpc = http.NotFoundHandler()
	}
}

// servePeeked is serveRPC, the body first read and shown to peek when
// the endpoint has one (before the gate): a request peek diverts is
// served by its handler, the others by serveRPC with the refusal peek
// chose. The credential is checked before the body is read, and the gate
// (the diverted handler's too) takes that outcome: a refused one is
// answered with the body unread but for one host.RefusalBody reads (a
// small declared length: the call's id, the divert), so a caller without
// a credential never has the body bound's worth read nor is answered 413.
// A body refused as it is read (over the limit, cut short) is counted as
// serveRPC counts it (method "?"), not left out of the metric.
func (s *Server) servePeeked(w http.ResponseWriter, r *http.Request, e rpcEndpoint, peek func([]byte) (http.Handler, host.Refuse)) {
	if peek == nil {
		s.serveRPC(w, r, e)
		return
	}
	received := time.Now() // before the body is read: host.Call.Received
	if s.opts.auth != nil {
		p, err := s.opts.auth.Authenticate(r)
		r = r.WithContext(withAuthenticated(r.Context(), p, err))
		if err != nil {
			s.servePeekedBody(w, r, e, peek, host.RefusalBody(r, s.opts.maxBody), received)
			return
		}
	}
	rec := &obs.StatusWriter{ResponseWriter: w}
	body, ok := s.readRPCBody(rec, r)
	if !ok {
		s.metrics.requests.WithLabelValues(e.protocol, "?", strconv.Itoa(rec.Code)).Inc()
		logRequest(s.opts.log, r, rec.Code, received, "", slog.String("rpc", "?"))
		return
	}
	s.servePeekedBody(w, r, e, peek, body, received)
}

// servePeekedBody is servePeeked once body is read: shown to peek, and
// put back for the handler.
func (s *Server) servePeekedBody(w http.ResponseWriter, r *http.Request, e rpcEndpoint, peek func([]byte) (http.Handler, host.Refuse), body []byte, received time.Time) {
	r.Body = io.NopCloser(bytes.NewReader(body))
	divert, refuse := peek(body)
	if divert != nil {
		divert.ServeHTTP(w, r)
		return
	}
	if refuse != nil {
		e.shape = refuse
	}
	s.serveRPCAt(w, r, e, received)
}

// counted counts every answer of h in the requests metric.
func (s *Server) counted(protocol, route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{StatusWriter: obs.StatusWriter{ResponseWriter: w}}
		defer func() {
			s.metrics.requests.WithLabelValues(protocol, route, strconv.Itoa(rec.Code)).Inc()
			logRequest(s.opts.log, r, rec.Code, start, rec.requestID)
		}()
		h.ServeHTTP(rec, r)
	})
}

// protocolHost is the server as the protocol packages' host.
type protocolHost struct{ s *Server }

var (
	_ host.RPCHost     = protocolHost{}
	_ host.TaskHost    = protocolHost{}
	_ a2av1.Host       = protocolHost{}
	_ host.BindingHost = protocolHost{}
)

// Admit is the gate.
func (h protocolHost) Admit(w http.ResponseWriter, r *http.Request, protocol string, refuse host.Refuse) (host.Caller, bool) {
	c, ok := h.admit(w, r, protocol, refuse)
	if !ok {
		return nil, false
	}
	return c, true
}

// admit is the gate, its caller concrete (Admit, AdmitBinding).
func (h protocolHost) admit(w http.ResponseWriter, r *http.Request, protocol string, refuse host.Refuse) (caller, bool) {
	p, ok := h.s.gate(w, r, protocol, refuse)
	if !ok {
		return caller{}, false
	}
	return caller{s: h.s, p: p, rec: recorderOf(w), fresh: &freshIDs{}}, true
}

// AdmitBinding is Admit for an SDK binding's HTTP call (host.HeaderGate).
func (h protocolHost) AdmitBinding(w http.ResponseWriter, r *http.Request, protocol string, refuse host.Refuse) (host.BindingCaller, bool) {
	// The bindings answer a body that is not JSON by its Content-Type
	// themselves (A2A's ContentTypeNotSupportedError with its ErrorInfo).
	c, ok := h.admit(w, r.WithContext(withBodyChecked(r.Context())), protocol, refuse)
	if !ok {
		return nil, false
	}
	return c, true
}

// recorderOf finds the statusRecorder of counted under w (nil when w has
// none), where the caller notes the request id it published for the
// request's log line.
func recorderOf(w http.ResponseWriter) *statusRecorder {
	for {
		switch v := w.(type) {
		case *statusRecorder:
			return v
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return nil
		}
	}
}

// Serve answers from the request's frames with egress.
func (h protocolHost) Serve(w http.ResponseWriter, r *http.Request, requestID, format string, newRenderer render.NewRenderer) {
	h.s.egress.Serve(w, r, requestID, format, newRenderer)
}

// WriteTimeout is egress's write timeout.
func (h protocolHost) WriteTimeout() time.Duration { return h.s.egress.WriteTimeout() }

// ServeE2A is egress's E2A answer.
func (h protocolHost) ServeE2A(w http.ResponseWriter, r *http.Request, requestID string) {
	h.s.egress.ServeE2A(w, r, requestID)
}

// ServeFrom answers from the request's frames from a sequence with egress.
func (h protocolHost) ServeFrom(ctx context.Context, w http.ResponseWriter, requestID, format string, from int64, newRenderer render.NewRenderer) {
	h.s.egress.ServeFrom(ctx, w, requestID, format, from, newRenderer)
}

// Replay is egress.Replay of the server's connection, without the request
// check (the request was just published).
func (h protocolHost) Replay(ctx context.Context, requestID string, fn func(render.Frame) error) error {
	return egress.Replay(ctx, h.s.nc, requestID, 0, fn, egress.WithoutRequestCheck())
}

// Stored reads the frames stored so far with an egress reader, from the
// first one stored (egress.WithFirstStored).
func (h protocolHost) Stored(ctx context.Context, requestID string, fn func(*e2a.Response) error) error {
	rd, err := egress.Open(ctx, h.s.nc, requestID, 0, egress.WithoutRequestCheck(), egress.WithFirstStored())
	if err != nil {
		return err
	}
	defer rd.Close()
	for {
		f, ok, err := rd.NextStored(ctx)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if !ok || err != nil {
			return nil
		}
		if err := fn(f.Response); err != nil {
			return err
		}
	}
}

// Last reads the last frame stored for requestID: the last message on its
// response subject (the last frame of a burst).
func (h protocolHost) Last(ctx context.Context, requestID string) (*e2a.Response, error) {
	subj, err := subjects.Response(requestID)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", egress.ErrNotFound, err)
	}
	m, err := streams.LastBySubject(ctx, h.s.nc, streams.ResponsesStream, subj)
	if errors.Is(err, streams.ErrNoMessages) {
		return nil, fmt.Errorf("%w: %q", egress.ErrNotFound, requestID)
	}
	if err != nil {
		return nil, err
	}
	last, _, err := e2a.LastInBurst(m.Header.Get(subjects.HeaderFrames), m.Data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", egress.ErrInvalidFrame, err)
	}
	r, err := e2a.UnmarshalResponse(last)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", egress.ErrInvalidFrame, err)
	}
	return r, nil
}

// Envelope reads the envelope of requestID from E2A_REQUESTS, whatever its
// pool.
func (h protocolHost) Envelope(ctx context.Context, requestID string) (*e2a.Envelope, error) {
	st, err := h.s.js.Stream(ctx, streams.RequestsStream)
	if err != nil {
		return nil, err
	}
	return loadEnvelope(ctx, st, requestID), nil
}

// Cancel publishes a cancel on the request's control subject once the
// request is stored (awaitStored: a task's turn is recorded before it is
// published, and one that ran longer than E2A_REQUESTS_MAX_AGE is known
// by its frames); nothing for a request never published.
func (h protocolHost) Cancel(ctx context.Context, requestID string) error {
	if _, ok := h.s.awaitStored(ctx, requestID); !ok {
		return nil
	}
	return h.s.cancel(ctx, requestID)
}

// CancelTurns cancels the turns of the session sess not ended
// (egress.Service.UnendedTurnsAwaited: a turn listed and publishing still
// is awaited, not skipped), the newest first, but for a request that
// is not the session's own (host.Session.Owns, read from the envelope
// awaitStored finds): another principal's, stored under an id the record
// lists once the hot streams dropped the session's request. A turn the
// session listed when read and taken out since (its publish failed) is
// not awaited further: the session's record is read again as it waits
// (egress.WithListing), else the cancel was held up to the publish wait.
func (h protocolHost) CancelTurns(ctx context.Context, sess *host.Session) error {
	ids := sess.RequestIDs
	if len(ids) == 0 {
		return nil
	}
	if egress.ListingOf(ctx) == nil {
		ctx = egress.WithListing(ctx, h.s.opts.tasks.listing(KindSession, sess.ID))
	}
	earlier, err := h.s.egress.UnendedTurnsAwaited(ctx, ids[:len(ids)-1], host.AwaitPublish)
	if err != nil {
		return err
	}
	for _, id := range append([]string{ids[len(ids)-1]}, earlier...) {
		st, ok := h.s.awaitStored(ctx, id)
		if !ok {
			continue // never published: nothing to cancel
		}
		if st.aged && !sess.OwnsFrames(st.frameUser) {
			continue // its envelope aged out, its frames another principal's
		}
		if env, err := e2a.FromJSON(st.env); err == nil && (!sess.Owns(env) || receivedSince(env, sess.CancelBefore)) {
			continue // another principal's, or received after the cancel
		}
		if err := h.s.cancel(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// receivedSince reports whether env, a turn, was received at or after t
// (its timestamp: when its front door received it), t not zero: a
// session/cancel received at t leaves it running (host.Session.CancelBefore).
func receivedSince(env *e2a.Envelope, t time.Time) bool {
	if t.IsZero() {
		return false
	}
	at, err := e2a.ParseTime(env.Timestamp)
	return err == nil && !at.Before(t.Truncate(time.Microsecond))
}

// storedTurn is what awaitStored found of a request: its envelope, or,
// when E2A_REQUESTS no longer holds it while E2A_RESPONSES holds frames of
// it (aged: a turn running longer than E2A_REQUESTS_MAX_AGE, its
// envelope, stored first, aged out first), the user_id its newest frame
// carries (the envelope's, e2a.ResponseFor).
type storedTurn struct {
	env       []byte
	aged      bool
	frameUser string
}

// awaitStored reports whether requestID is stored in E2A_REQUESTS, and
// returns its envelope, waiting for a turn whose session or task record
// already holds it while its publish has not landed (publishTurn appends
// to the record first): a cancel stored before its request can be missed
// by a worker that starts between the two (agent.Cancel). It waits up to
// the publish timeout and a second, and is false when the request never is
// (its publish failed and the record lets it go), when the record ctx
// carries (egress.WithListing) lists it no longer (refused once recorded,
// stillOpen, or its publish failed: taken out again), or ctx ends; true
// without an envelope, to cancel as before, when E2A_REQUESTS cannot be
// read. A request with frames in E2A_RESPONSES was stored: when
// E2A_REQUESTS no longer holds it (aged out while it ran), the first miss
// finds them and it is true at once (storedTurn.aged; one direct get more
// on a miss). Before, such a request was awaited the whole wait and taken
// for one never published: a task or session running longer than
// E2A_REQUESTS_MAX_AGE could not be cancelled.
func (s *Server) awaitStored(ctx context.Context, requestID string) (storedTurn, bool) {
	subj, err := subjects.RequestAnyPool(requestID)
	if err != nil {
		return storedTurn{}, false
	}
	listed := egress.ListingOf(ctx)
	ctx, cancel := context.WithTimeout(ctx, s.opts.publishTimeout+time.Second)
	defer cancel()
	for wait := 2 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		m, err := streams.LastBySubject(ctx, s.nc, streams.RequestsStream, subj)
		if !errors.Is(err, streams.ErrNoMessages) {
			return storedTurn{env: m.Data}, err == nil || ctx.Err() == nil
		}
		if wait == 2*time.Millisecond {
			if user, ok := s.framesOf(ctx, requestID); ok {
				return storedTurn{aged: true, frameUser: user}, true
			}
		}
		if listed != nil {
			if ids, err := listed(ctx); err == nil && !slices.Contains(ids, requestID) {
				// Taken out of the record: stored only if its publish
				// landed before its removal.
				m, err := streams.LastBySubject(ctx, s.nc, streams.RequestsStream, subj)
				return storedTurn{env: m.Data}, err == nil
			}
		}
		if sleepctx.Sleep(ctx, wait) != nil {
			return storedTurn{}, false
		}
	}
}

// framesOf reports whether E2A_RESPONSES holds a frame of requestID, and
// the user_id its newest frame carries (one direct get; false when it
// cannot be read).
func (s *Server) framesOf(ctx context.Context, requestID string) (user string, ok bool) {
	subj, err := subjects.Response(requestID)
	if err != nil {
		return "", false
	}
	m, err := streams.LastBySubject(ctx, s.nc, streams.ResponsesStream, subj)
	if err != nil {
		return "", false
	}
	if last, _, err := e2a.LastInBurst(m.Header.Get(subjects.HeaderFrames), m.Data); err == nil {
		if f, err := e2a.ResponseFromJSON(last); err == nil {
			user = f.UserID
		}
	}
	return user, true
}

// AuthMethods describes each configured scheme a client can use.
func (h protocolHost) AuthMethods() []host.AuthMethod {
	var out []host.AuthMethod
	if h.s.opts.auth == nil {
		return out
	}
	for _, sc := range h.s.opts.auth.Schemes() {
		var name, desc, stdio string
		switch sc {
		case SchemeAPIKey:
			name, desc = "API key", "send the key in the "+HeaderAPIKey+" header"
			stdio = "set " + EnvACPAPIKey + " to the key in the environment the editor starts e2a acp with, then restart it"
		case SchemeBearer:
			name, desc = "Bearer token", "send Authorization: Bearer <token>"
			stdio = "set " + EnvACPBearerToken + " to the token in the environment the editor starts e2a acp with, then restart it"
		case SchemeOAuth2:
			name, desc = "OAuth2 client credentials", "get a token from POST /oauth/token, send Authorization: Bearer <token>"
			stdio = "get a token from POST /oauth/token, set " + EnvACPBearerToken +
				" to it in the environment the editor starts e2a acp with, then restart it"
		default:
			continue
		}
		out = append(out, host.AuthMethod{ID: sc, Name: name, Description: desc, StdioDescription: stdio})
	}
	return out
}

// TaskFrames is the server's egress service.
func (h protocolHost) TaskFrames() host.TaskFrames { return h.s.egress }

// BindingRPC is the JSON-RPC handler of the first binding server's
// bindings (A2A v1.0's, of A2AV1Path), counted.
func (h protocolHost) BindingRPC() http.Handler { return h.s.v1rpc }

// V1Answers are package protocols/a2a's answers over the server's egress
// service.
func (h protocolHost) V1Answers() a2av1.Answers { return a2a.NewAnswers(h.s.egress) }

// Logger is the server's logger.
func (h protocolHost) Logger() *slog.Logger { return h.s.opts.log }

// Normalizer is the server's normalizer.
func (h protocolHost) Normalizer() *normalizer.Normalizer { return h.s.opts.norm }

// MaxBody is WithMaxBody's bound.
func (h protocolHost) MaxBody() int64 { return h.s.opts.maxBody }

// Version is the server's Version.
func (h protocolHost) Version() string { return Version }

// caller is a principal the gate admitted.
type caller struct {
	s   *Server
	p   Principal
	rec *statusRecorder // of the HTTP answer, for its log line; may be nil
	// fresh records the ids made for the call (nil: none recorded, every
	// request id is treated as chosen by the client).
	fresh *freshIDs
}

var (
	_ host.Caller        = caller{}
	_ host.BindingCaller = caller{}
)

// Input is the server's input for the principal.
func (c caller) Input(r *http.Request, body []byte, agent string) normalizer.Input {
	return c.s.input(r, body, c.p, agent, c.fresh)
}

// StreamSlot is acquireStream.
func (c caller) StreamSlot(w http.ResponseWriter, refuse host.Refuse) (func(), bool) {
	return c.s.acquireStream(w, c.p, refuse)
}

// Charge charges n more requests to the principal's rate limit. While the
// caller's HTTP answer has not started, the limiter's headers
// (X-RateLimit-*, Retry-After on a refusal) are set on it, as the gate's
// are: a refusal the door renders carries them whatever its shape. Once
// the answer has started (an A2E body's later message) no header can be
// added; the refusal carries the wait as RetryAfter and, over the limit,
// the limit's body as Data.
func (c caller) Charge(ctx context.Context, protocol string, n int) *host.Refusal {
	hdr := http.Header{}
	if c.rec != nil && c.rec.Code == 0 {
		hdr = c.rec.Header()
	}
	f, canceled := c.s.rateLimit(ctx, c.p, protocol, n, hdr, false, nil)
	if canceled {
		return &host.Refusal{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the request ended", Retryable: true,
			RPCCode: jsonrpc.CodeInternalError}
	}
	return f
}

// The A2A v1.0 seam (host.BindingCaller): the caller's tasks and contexts
// under the ownership rule, errors returned.

// HeaderInput is the server's input of a call's headers for the principal.
func (c caller) HeaderInput(header http.Header, agent string) normalizer.Input {
	return c.s.inputFrom(header, nil, c.p, agent, c.fresh)
}

// AcquireStream is streamSlot.
func (c caller) AcquireStream() (func(), bool) {
	release, f := c.s.streamSlot(c.p)
	return release, f == nil
}

// Task is the owned task record (rpcCaller's).
func (c caller) Task(ctx context.Context, id string, a tenant.Access) (*host.Task, error) {
	return rpcCaller{s: c.s, p: c.p, fresh: c.fresh}.Task(ctx, id, a)
}

// CheckTaskOpen is rpcCaller's.
func (c caller) CheckTaskOpen(ctx context.Context, t *host.Task) error {
	return rpcCaller{s: c.s, p: c.p, fresh: c.fresh}.CheckTaskOpen(ctx, t)
}

// Record is the task record id (with session, the session record: an
// ACP session's) that a request of the caller names to continue it (the
// E2A front door's, host.TurnRecords): nil when there is none, the record when the
// caller may write it, an error matching host.ErrConflict, saying nothing
// of it, when it is another principal's, host.ErrBackpressure when the
// store cannot be read.
func (c caller) Record(ctx context.Context, id string, session bool) (*host.Task, error) {
	kind := KindTask
	if session {
		kind = KindSession
	}
	rec, err := c.s.opts.tasks.Get(ctx, kind, id)
	switch {
	case errors.Is(err, ErrTaskNotFound):
		return nil, nil
	case errors.Is(err, context.Canceled):
		return nil, err
	case err != nil:
		return nil, hostError(fmt.Errorf("%w: task store: %v", ErrBackpressure, err))
	case !c.p.Tenant().Allows(tenant.Write, rec.Principal):
		return nil, hostError(ErrConflict)
	}
	return &host.Task{Session: c.p.session(rec), ContextID: rec.ContextID}, nil
}

// ListTasks lists the tasks the principal may read that keep accepts:
// their records (at most max keys) and the one-turn tasks among the newest
// max requests (TaskStore.listTasks).
func (c caller) ListTasks(ctx context.Context, max int, keep func(*host.ListedTask) bool) ([]*host.ListedTask, error) {
	var out []*host.ListedTask
	owns := func(r *TaskRecord) bool { return c.p.Tenant().Allows(tenant.Read, r.Principal) }
	_, err := c.s.opts.tasks.listTasks(ctx, max, owns, func(r *TaskRecord) bool {
		t := &host.ListedTask{Task: host.Task{Session: c.p.session(r), ContextID: r.ContextID}, Updated: r.Updated}
		if keep(t) {
			out = append(out, t)
		}
		return false // kept in out, converted
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// rpcCaller is a principal a JSON-RPC transport admitted, as the calls of
// a protocol package see it.
type rpcCaller struct {
	s *Server
	p Principal
	// fresh records the ids made for the call (caller's).
	fresh *freshIDs
	// rec is the HTTP answer of the call, whose log line names the
	// request it published (nil: a batch element, a line transport).
	rec *statusRecorder
}

var _ host.RPCCaller = rpcCaller{}

// Input is the server's input of the decoded call.
func (c rpcCaller) Input(in host.Call, req *Request) normalizer.Input {
	return c.s.rpcInput(in, c.p, req, c.fresh)
}

// StreamSlot is rpcStreamSlot.
func (c rpcCaller) StreamSlot(rep host.Reply) (func(), bool) { return c.s.rpcStreamSlot(rep, c.p) }

// CreateSession writes a new session record (KindSession) with no request
// yet.
func (c rpcCaller) CreateSession(ctx context.Context, protocol, id, pool string) error {
	now := e2a.FormatTime(c.s.opts.now())
	rec := TaskRecord{ID: id, Protocol: protocol, Pool: pool, Principal: c.p.UserID, RequestIDs: []string{}, Created: now, Updated: now}
	key, err := taskKey(KindSession, rec.ID)
	if err != nil {
		return err
	}
	data, _ := json.Marshal(rec)
	return c.s.opts.tasks.create(ctx, key, data)
}

// Session is the owned session record; ErrTaskNotFound (which matches
// host.ErrSessionNotFound too) for another protocol's.
func (c rpcCaller) Session(ctx context.Context, protocol, id string, a tenant.Access) (*host.Session, error) {
	rec, err := c.s.ownedRecord(ctx, c.p, KindSession, id, a)
	if err == nil && rec.Protocol != protocol {
		err = ErrTaskNotFound
	}
	if err != nil {
		return nil, hostError(err)
	}
	sess := c.p.session(rec)
	return &sess, nil
}

var _ host.SessionCanceler = rpcCaller{}

// CancelSession marks the owned session id of protocol as cancelled for
// the turns received before received (TaskStore.markCancelBefore) and
// returns it as marked; ErrTaskNotFound (host.ErrSessionNotFound) for
// another protocol's or principal's, nothing written.
func (c rpcCaller) CancelSession(ctx context.Context, protocol, id string, received time.Time) (*host.Session, error) {
	rec, err := c.s.opts.tasks.markCancelBefore(ctx, protocol, id, received, c.p.Tenant())
	if err != nil {
		return nil, hostError(err)
	}
	sess := c.p.session(rec)
	sess.CancelBefore = received
	return &sess, nil
}

// PutSessionData stores data under kind/id in the task bucket.
func (c rpcCaller) PutSessionData(ctx context.Context, kind, id string, data []byte) error {
	key, err := taskKey(kind, id)
	if err != nil {
		return err
	}
	_, err = c.s.opts.tasks.kv.Put(ctx, key, data)
	return err
}

// SessionData reads what PutSessionData stored.
func (c rpcCaller) SessionData(ctx context.Context, kind, id string) ([]byte, error) {
	key, err := taskKey(kind, id)
	if err != nil {
		return nil, err
	}
	e, err := c.s.opts.tasks.kv.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return e.Value(), nil
}

// hostKinds pairs the front door's sentinel errors with the host's.
var hostKinds = []struct{ ingress, host error }{
	{ErrUnknownPool, host.ErrUnknownPool},
	{errContextConflict, host.ErrContextConflict}, // before ErrConflict, which it matches
	{errWorkflowTurn, host.ErrTurnConflict},       // the same
	{errPoolTurn, host.ErrTurnConflict},           // the same
	{ErrConflict, host.ErrConflict},
	{ErrTooLarge, host.ErrTooLarge},
	{ErrBackpressure, host.ErrBackpressure},
	{ErrTaskNotFound, host.ErrSessionNotFound},
	{ErrInvalidPool, host.ErrInvalidPool},
	{ErrTaskTerminal, host.ErrTaskTerminal},
	{ErrTooManyTurns, host.ErrTooManyTurns},
}

// hostError returns err matching the host's sentinel of its kind as well,
// with its text unchanged.
func hostError(err error) error {
	if err == nil {
		return nil
	}
	for _, k := range hostKinds {
		if errors.Is(err, k.ingress) {
			return kindError{err: err, kind: k.host}
		}
	}
	return err
}

// kindError is an error of the front door that also matches a host
// sentinel.
type kindError struct{ err, kind error }

func (e kindError) Error() string   { return e.err.Error() }
func (e kindError) Unwrap() []error { return []error{e.err, e.kind} }

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
