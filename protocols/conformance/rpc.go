package conformance

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// RPCHost is [Host] for a JSON-RPC protocol package's calls (a
// host.RPCHost) without ingress or NATS: the same admission, submissions
// and answers, and what the calls need beyond them. Sessions are kept in
// memory under the ownership rule of one principal (Caller); the Frames
// of a request are its replayed and stored frames; the envelopes it
// accepted are read back; cancels are recorded ([RPCHost.Canceled]); Auth
// lists the schemes; the logger discards. A submission that is a turn
// appends its request to the session's record. Its zero value is ready;
// it is safe for concurrent use.
type RPCHost struct {
	Host
	// Auth is what AuthMethods lists.
	Auth []host.AuthMethod

	sessions map[string]*host.Session
	data     map[string][]byte
	canceled []string
}

var (
	_ host.RPCHost   = (*RPCHost)(nil)
	_ host.RPCCaller = rpcCaller{}
)

// Caller is the principal of the host's calls.
func (h *RPCHost) Caller() host.RPCCaller { return rpcCaller{h} }

// ServeFrom records the request and format, then renders the request's
// Frames after sequence from.
func (h *RPCHost) ServeFrom(_ context.Context, w http.ResponseWriter, requestID, format string, from int64, newRenderer render.NewRenderer) {
	h.serveFrom(w, requestID, format, from, newRenderer)
}

// Replay calls fn with the request's Frames; egress.ErrNotFound when it
// has none.
func (h *RPCHost) Replay(_ context.Context, requestID string, fn func(render.Frame) error) error {
	if len(h.framesOf(requestID)) == 0 {
		return egress.ErrNotFound
	}
	return h.eachFrame(requestID, fn)
}

// Stored calls fn with the request's Frames; egress.ErrNotFound when it
// has none.
func (h *RPCHost) Stored(ctx context.Context, requestID string, fn func(*e2a.Response) error) error {
	return h.Replay(ctx, requestID, func(f render.Frame) error { return fn(f.Response) })
}

// Last is the request's last frame; egress.ErrNotFound when it has none.
func (h *RPCHost) Last(ctx context.Context, requestID string) (*e2a.Response, error) {
	var last *e2a.Response
	if err := h.Stored(ctx, requestID, func(r *e2a.Response) error { last = r; return nil }); err != nil {
		return nil, err
	}
	return last, nil
}

// Envelope is the envelope the host accepted with that request id, nil
// when none.
func (h *RPCHost) Envelope(_ context.Context, requestID string) (*e2a.Envelope, error) {
	for _, env := range h.Published() {
		if env.RequestID == requestID {
			return env, nil
		}
	}
	return nil, nil
}

// Cancel records the request as canceled.
func (h *RPCHost) Cancel(_ context.Context, requestID string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.canceled = append(h.canceled, requestID)
	return nil
}

// CancelTurns records as canceled, newest first, the turns of s whose
// Frames hold no final frame (the others have ended).
func (h *RPCHost) CancelTurns(ctx context.Context, s *host.Session) error {
	for _, id := range slices.Backward(s.RequestIDs) {
		if !slices.ContainsFunc(h.framesOf(id), func(r *e2a.Response) bool { return r.IsFinal }) {
			_ = h.Cancel(ctx, id)
		}
	}
	return nil
}

// Canceled returns the requests canceled so far, in order.
func (h *RPCHost) Canceled() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.canceled)
}

// Session returns the session id as recorded now (nil when none); its
// RequestIDs are the turns submitted.
func (h *RPCHost) Session(id string) *host.Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.sessions[id]; ok {
		c := *s
		c.RequestIDs = slices.Clone(s.RequestIDs)
		return &c
	}
	return nil
}

// SessionData returns the document of kind stored for session id.
func (h *RPCHost) SessionData(kind, id string) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.data[kind+"/"+id]
}

// AuthMethods is Auth.
func (h *RPCHost) AuthMethods() []host.AuthMethod { return h.Auth }

// Logger discards.
func (h *RPCHost) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// rpcCaller is the principal of an RPCHost's calls.
type rpcCaller struct{ h *RPCHost }

// Input is the normalizer's view of the decoded call.
func (c rpcCaller) Input(in host.Call, req *jsonrpc.Request) normalizer.Input {
	return normalizer.Input{Header: in.Header, Channel: in.Channel, Agent: in.Agent,
		RPC: &normalizer.RPCRequest{ID: req.ID, Method: req.Method, Params: req.Params}}
}

// Submit is [Host]'s, a turn of a session appended to its record before
// the publish (taken off again when the publish fails).
func (c rpcCaller) Submit(ctx context.Context, s host.Submission) (*host.Submitted, error) {
	var hooks submitHooks
	if s.Turn != nil && s.Turn.Session {
		hooks.record = func() (func(), error) { return c.h.appendTurn(s.Turn.Task.ID, s.Envelope.RequestID), nil }
	}
	return caller{&c.h.Host}.submit(ctx, s, hooks)
}

// appendTurn appends requestID to session id's record, if there is one,
// and returns how to take it off again.
func (h *RPCHost) appendTurn(id, requestID string) (undo func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rec, ok := h.sessions[id]
	if !ok {
		return func() {}
	}
	rec.RequestIDs = append(rec.RequestIDs, requestID)
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		rec.RequestIDs = slices.DeleteFunc(rec.RequestIDs, func(r string) bool { return r == requestID })
	}
}

// StreamSlot takes a slot, or answers 429 too_many_streams when NoSlot is
// set (host.TooManyStreams, its wait rendered by rep.Refuse).
func (c rpcCaller) StreamSlot(rep host.Reply) (func(), bool) {
	release, ok := caller{&c.h.Host}.slot()
	if !ok {
		rep.Refuse(host.TooManyStreams)
	}
	return release, ok
}

// CreateSession records a new session; it fails if the id exists.
func (c rpcCaller) CreateSession(_ context.Context, protocol, id, pool string) error {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	if _, ok := c.h.sessions[id]; ok {
		return host.ErrConflict
	}
	if c.h.sessions == nil {
		c.h.sessions = map[string]*host.Session{}
	}
	c.h.sessions[id] = &host.Session{ID: id, Protocol: protocol, Pool: pool}
	return nil
}

// Session returns the session of protocol; host.ErrSessionNotFound when
// there is none.
func (c rpcCaller) Session(_ context.Context, protocol, id string, _ tenant.Access) (*host.Session, error) {
	s := c.h.Session(id)
	if s == nil || s.Protocol != protocol {
		return nil, host.ErrSessionNotFound
	}
	return s, nil
}

// PutSessionData stores the document.
func (c rpcCaller) PutSessionData(_ context.Context, kind, id string, data []byte) error {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	if c.h.data == nil {
		c.h.data = map[string][]byte{}
	}
	c.h.data[kind+"/"+id] = slices.Clone(data)
	return nil
}

// SessionData returns the document PutSessionData stored;
// egress.ErrNotFound when none.
func (c rpcCaller) SessionData(_ context.Context, kind, id string) ([]byte, error) {
	if d := c.h.SessionData(kind, id); d != nil {
		return d, nil
	}
	return nil, egress.ErrNotFound
}
