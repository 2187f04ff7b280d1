package ingress

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/obs"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// rpcEndpoint is one JSON-RPC 2.0 endpoint (each registered
// host.RPCEndpoint: /a2a, /acp) as ingress's transports serve it: its protocol
// label, refusal shape, which methods stream (and so cannot be batched),
// the metric label of a method, and the answer of one call for the
// principal the gate admitted.
type rpcEndpoint struct {
	protocol  string
	shape     errorShape
	streaming func(method string) bool
	metric    func(method string) string
	call      func(rep host.Reply, in host.Call, p Principal, req *Request)
	// notifyErrors answers an id-less call that fails with its JSON-RPC
	// error (id null) instead of 204 (A2A: it defines no notifications).
	notifyErrors bool
	// lines is how the line transport (stdio) serves it; nil when it is
	// not served there.
	lines *host.Lines
	// cancels reports the methods that cancel a request of the caller
	// (host.RPCEndpoint.Cancels); nil: none.
	cancels func(method string) bool
	// open reports the methods answered without a credential where auth
	// requires one (host.RPCEndpoint.Open); nil: none.
	open func(method string) bool
}

// rpcEndpointOf is the endpoint of a protocol package, its calls made for
// the principal as a host.RPCCaller.
func (s *Server) rpcEndpointOf(e host.RPCEndpoint) rpcEndpoint {
	return rpcEndpoint{protocol: e.Protocol, shape: e.Refuse, streaming: e.Streaming, metric: e.Metric,
		notifyErrors: e.NotifyErrors, lines: e.Lines, cancels: e.Cancels, open: e.Open,
		call: func(rep host.Reply, in host.Call, p Principal, req *Request) {
			e.Serve(rep, in, rpcCaller{s: s, p: p, fresh: newFreshIDs(in.Ctx), rec: recorderOf(rep.Stream())}, req)
		}}
}

// cancelTest is the gate's cancel test of r (rateLimit): its body, at most
// host.MaxCancelBody bytes read then put back, is one call of a method
// that cancels (host.IsCancelCall). nil when the endpoint has none.
func (e rpcEndpoint) cancelTest(r *http.Request) func() bool {
	cancels := e.cancels
	if cancels == nil {
		return nil
	}
	return func() bool {
		body, whole := host.PeekBody(r, host.MaxCancelBody)
		return whole && host.IsCancelCall(body, cancels)
	}
}

// openTest is the gate's test of an open call of r (rateLimit's
// counterpart for auth: gateCancel): its body, of a declared length within
// host.MaxRefusalBody (servePeeked has read no more of a caller without a
// credential: host.RefusalBody), read then put back, is one call of an
// open method (host.IsOpenCall). nil when the endpoint has none.
func (e rpcEndpoint) openTest(r *http.Request) func() bool {
	open := e.open
	if open == nil {
		return nil
	}
	return func() bool {
		if r.ContentLength <= 0 || r.ContentLength > host.MaxRefusalBody {
			return false
		}
		body, whole := host.PeekBody(r, host.MaxRefusalBody)
		return whole && host.IsOpenCall(body, open)
	}
}

// httpIn is the call input of a JSON-RPC call that came over HTTP,
// received (its handling began) at received.
func httpIn(r *http.Request, received time.Time) host.Call {
	return host.Call{Ctx: r.Context(), Header: r.Header, Agent: r.URL.Query().Get("agent"), Channel: "http", Request: r,
		Received: received}
}

// rpcInput is the normalizer input of one JSON-RPC call: the request is
// already decoded, so the adapters read it as is, with no second encode
// and parse.
func (s *Server) rpcInput(in host.Call, p Principal, req *Request, fresh *freshIDs) normalizer.Input {
	nin := s.inputFrom(in.Header, nil, p, in.Agent, fresh)
	nin.Channel = in.Channel
	nin.RPC = &normalizer.RPCRequest{ID: req.ID, Method: req.Method, Params: req.Params}
	return nin
}

// The answer of one JSON-RPC call (a host.Reply) goes to the HTTP response
// of a single call, to a value for a batch element or a
// notification ([valueReply]), or to lines on stdio ([stdioReply]);
// host.HTTPReply is the first.

// valueReply keeps the answer as a value: the result or error of a batch
// element, or what a notification would have answered.
type valueReply struct {
	result   any
	err      *Error
	answered bool
	hdr      http.Header
}

var _ host.Reply = (*valueReply)(nil)

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
	s.serveRPCAt(w, r, e, time.Now()) // before the gate: host.Call.Received
}

// serveRPCAt is serveRPC of a request whose handling began at received
// (servePeeked reads the body first).
func (s *Server) serveRPCAt(w http.ResponseWriter, r *http.Request, e rpcEndpoint, received time.Time) {
	rec := &statusRecorder{StatusWriter: obs.StatusWriter{ResponseWriter: w}}
	method := "?"
	defer func() {
		s.metrics.requests.WithLabelValues(e.protocol, method, strconv.Itoa(rec.Code)).Inc()
		logRequest(s.opts.log, r, rec.Code, received, rec.requestID, slog.String("rpc", method))
	}()
	w = rec
	p, ok := s.gateCancel(w, r, e.protocol, e.shape, e.cancelTest(r), e.openTest(r))
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
			e.call(&v, httpIn(r, received).WithContext(ctx), p, req)
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
		e.call(&v, httpIn(r, received), p, &c.Request)
		if e.notifyErrors && v.err != nil {
			_ = jsonrpc.WriteError(w, nil, v.err)
			return
		}
		jsonrpc.WriteNoReply(w)
		return
	}
	e.call(host.HTTPReply(w, c.Request.ID), httpIn(r, received), p, &c.Request)
}
