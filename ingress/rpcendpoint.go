package ingress

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
)

// rpcEndpoint describes one JSON-RPC 2.0 endpoint (/a2a, /acp): its
// protocol label, refusal shape, which methods stream (and so cannot be
// batched), the metric label of a method, and the answer of one call.
type rpcEndpoint struct {
	protocol  string
	shape     errorShape
	streaming func(method string) bool
	metric    func(method string) string
	call      func(w http.ResponseWriter, r *http.Request, p Principal, req *Request)
	// notifyErrors answers an id-less call that fails with its JSON-RPC
	// error (id null) instead of 204 (A2A: it defines no notifications).
	notifyErrors bool
}

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
	calls, batch, derr := DecodeJSONRPC(body, DecodeOptions{})
	if derr != nil {
		_ = WriteError(w, nil, derr)
		return
	}
	if batch {
		method = "batch"
		// The gate charged one request; every further element is charged
		// too, so a batch cannot multiply a principal's rate limit.
		if !s.charge(w, r, p, e.protocol, len(calls)-1, e.shape) {
			return
		}
		_ = ServeBatch(w, r, calls, e.streaming, func(ctx context.Context, req *Request) (any, *Error) {
			return callRecorded(r.WithContext(ctx), p, req, e.call)
		})
		return
	}
	c := calls[0]
	if c.Err != nil {
		_ = WriteError(w, c.Request.ID, c.Err)
		return
	}
	method = e.metric(c.Request.Method)
	if c.Request.IsNotification() {
		rw := httptest.NewRecorder()
		e.call(rw, r, p, &c.Request)
		if e.notifyErrors {
			var resp struct {
				Error *Error `json:"error"`
			}
			if json.Unmarshal(rw.Body.Bytes(), &resp) == nil && resp.Error != nil {
				_ = WriteError(w, nil, resp.Error)
				return
			}
		}
		WriteNoReply(w)
		return
	}
	e.call(w, r, p, &c.Request)
}

// callRecorded answers one batch element through a recorder and returns
// its JSON-RPC result or error (nothing for a notification).
func callRecorded(r *http.Request, p Principal, req *Request, call func(http.ResponseWriter, *http.Request, Principal, *Request)) (any, *Error) {
	rw := httptest.NewRecorder()
	call(rw, r, p, req)
	if req.IsNotification() {
		return nil, nil
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *Error          `json:"error"`
	}
	if err := json.Unmarshal(rw.Body.Bytes(), &resp); err != nil {
		return nil, InternalError("the answer could not be read")
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	return resp.Result, nil
}
