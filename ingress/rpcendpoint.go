package ingress

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
)

// rpcEndpoint describes one JSON-RPC 2.0 endpoint (/a2a, /acp): its
// protocol label, refusal shape, which methods stream (and so cannot be
// batched), the metric label of a method, and the answer of one call.
type rpcEndpoint struct {
	protocol  string
	shape     errorShape
	streaming func(method string) bool
	metric    func(method string) string
	call      func(rep rpcReply, in rpcIn, p Principal, req *Request)
	// notifyErrors answers an id-less call that fails with its JSON-RPC
	// error (id null) instead of 204 (A2A: it defines no notifications).
	notifyErrors bool
}

// rpcIn is what one JSON-RPC call carries besides its message, whatever
// the transport.
type rpcIn struct {
	ctx     context.Context
	header  http.Header // the HTTP request's headers; on stdio, the ones the connection sets
	agent   string      // the agent pool asked for (?agent=)
	channel string      // the envelope's provenance channel: "http" or "stdio"
	// r is the HTTP request when the transport is HTTP (streams negotiate
	// their format and resume from it); nil on stdio.
	r *http.Request
}

// httpIn is the rpcIn of a call that came over HTTP.
func httpIn(r *http.Request) rpcIn {
	return rpcIn{ctx: r.Context(), header: r.Header, agent: r.URL.Query().Get("agent"), channel: "http", r: r}
}

// withContext returns in with ctx (the context of one batch element).
func (in rpcIn) withContext(ctx context.Context) rpcIn {
	in.ctx = ctx
	if in.r != nil {
		in.r = in.r.WithContext(ctx)
	}
	return in
}

// rpcInput is the normalizer input of one JSON-RPC call: the request is
// already decoded, so the adapters read it as is, with no second encode
// and parse.
func (s *Server) rpcInput(in rpcIn, p Principal, req *Request) normalizer.Input {
	nin := s.inputFrom(in.header, nil, p, in.agent)
	nin.Channel = in.channel
	nin.RPC = &normalizer.RPCRequest{ID: req.ID, Method: req.Method, Params: req.Params}
	return nin
}

// rpcReply is where the answer of one JSON-RPC call goes, whatever carries
// it: the HTTP response of a single call ([httpReply]), or a value for a
// batch element or a notification ([valueReply]). A call answers exactly
// once, with Result, Error or Refuse, or by streaming into Stream.
type rpcReply interface {
	// Result answers with a result.
	Result(v any)
	// Error answers with a JSON-RPC error.
	Error(e *Error)
	// Refuse answers with a refusal that also has an HTTP status (413,
	// 429, 503…) where the transport has one.
	Refuse(f failure)
	// Header holds headers of the answer (Warning, Retry-After); they are
	// dropped where the transport has none.
	Header() http.Header
	// Stream is the writer a streaming method renders its answer into
	// (SSE, NDJSON), or nil when the answer cannot stream (a batch element,
	// a notification): the call then acts without rendering.
	Stream() http.ResponseWriter
}

// httpReply answers a single call as the whole HTTP response.
type httpReply struct {
	w  http.ResponseWriter
	id json.RawMessage
}

var _ rpcReply = httpReply{}

func (h httpReply) Result(v any)                { _ = jsonrpc.WriteResult(h.w, h.id, v) }
func (h httpReply) Error(e *Error)              { _ = jsonrpc.WriteError(h.w, h.id, e) }
func (h httpReply) Refuse(f failure)            { rpcRefusal(h.w, h.id, f) }
func (h httpReply) Header() http.Header         { return h.w.Header() }
func (h httpReply) Stream() http.ResponseWriter { return h.w }

// valueReply keeps the answer as a value: the result or error of a batch
// element, or what a notification would have answered.
type valueReply struct {
	result   any
	err      *Error
	answered bool
	hdr      http.Header
}

var _ rpcReply = (*valueReply)(nil)

func (v *valueReply) Result(x any)   { v.result, v.answered = x, true }
func (v *valueReply) Error(e *Error) { v.err, v.answered = e, true }
func (v *valueReply) Refuse(f failure) {
	v.Error(&Error{Code: f.RPCCode, Message: f.Message, Data: f.Data})
}

func (v *valueReply) Header() http.Header {
	if v.hdr == nil {
		v.hdr = http.Header{}
	}
	return v.hdr
}
func (v *valueReply) Stream() http.ResponseWriter { return nil }

// serveRPC is the whole exchange of a JSON-RPC endpoint: gate (auth, rate
// limit), body limit, decoding with the exact JSON-RPC 2.0 errors,
// notifications answered with no content, batches answered element by
// element (streaming methods refused inside them), one call otherwise.
func (s *Server) serveRPC(w http.ResponseWriter, r *http.Request, e rpcEndpoint) {
	rec := &statusRecorder{ResponseWriter: w}
	method := "?"
	defer func() { s.metrics.requests.WithLabelValues(e.protocol, method, strconv.Itoa(rec.code)).Inc() }()
	w = rec
	p, ok := s.gate(w, r, e.protocol, e.shape)
	if !ok {
		return
	}
	body, ok := s.readRPCBody(w, r)
	if !ok {
		return
	}
	calls, batch, derr := jsonrpc.Decode(body, jsonrpc.DecodeOptions{})
	if derr != nil {
		_ = jsonrpc.WriteError(w, nil, derr)
		return
	}
	if batch {
		method = "batch"
		// The gate charged one request; every further element is charged
		// too, so a batch cannot multiply a principal's rate limit.
		if !s.charge(w, r, p, e.protocol, len(calls)-1, e.shape) {
			return
		}
		resps := jsonrpc.Batch(r.Context(), calls, e.streaming, func(ctx context.Context, req *Request) (any, *Error) {
			var v valueReply
			e.call(&v, httpIn(r).withContext(ctx), p, req)
			return v.result, v.err
		})
		_ = jsonrpc.WriteBatch(w, resps)
		return
	}
	c := calls[0]
	if c.Err != nil {
		_ = jsonrpc.WriteError(w, c.Request.ID, c.Err)
		return
	}
	method = e.metric(c.Request.Method)
	if c.Request.IsNotification() {
		var v valueReply
		e.call(&v, httpIn(r), p, &c.Request)
		if e.notifyErrors && v.err != nil {
			_ = jsonrpc.WriteError(w, nil, v.err)
			return
		}
		jsonrpc.WriteNoReply(w)
		return
	}
	e.call(httpReply{w: w, id: c.Request.ID}, httpIn(r), p, &c.Request)
}
