package ingress

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// failure is a protocol-neutral refusal; each endpoint writes it in its
// protocol's own error shape (see errorShape).
type failure struct {
	Status    int    // HTTP status
	Code      string // machine-readable code for E2A/A2E bodies
	Message   string
	Retryable bool
	RPCCode   int // JSON-RPC error code
	Data      any
}

// errorShape writes a failure in one protocol's error format.
type errorShape func(w http.ResponseWriter, f failure)

// e2aShape writes {"error":{code,message,retryable}} with the HTTP status.
func e2aShape(w http.ResponseWriter, f failure) {
	writeError(w, f.Status, f.Code, f.Message, f.Retryable)
}

// gate authenticates the request, strips its credential headers and
// applies the principal's rate limit. On refusal it writes the answer in the
// endpoint's shape and returns ok=false; nothing has been published.
func (s *Server) gate(w http.ResponseWriter, r *http.Request, protocol string, shape errorShape) (Principal, bool) {
	p := Principal{UserID: "", IdentityOrigin: "user", Scheme: SchemeNone, Open: true}
	if s.opts.auth != nil {
		var err error
		p, err = s.opts.auth.Authenticate(r)
		StripCredentialHeaders(r.Header)
		if err != nil {
			s.metrics.authFailures.WithLabelValues(protocol).Inc()
			s.opts.auth.SetChallenge(w.Header(), err)
			status := AuthStatus(err)
			code, rpc := "unauthenticated", jsonrpc.CodeAuthentication
			if errors.Is(err, ErrForbidden) {
				code, rpc = "forbidden", jsonrpc.CodeAuthorization
			}
			shape(w, failure{Status: status, Code: code, Message: err.Error(), RPCCode: rpc})
			return p, false
		}
	} else {
		StripCredentialHeaders(r.Header)
	}
	if s.opts.limiter != nil {
		key := p.UserID
		if key == "" {
			key = "anonymous"
		}
		d, err := s.opts.limiter.Allow(r.Context(), key)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return p, false
			}
			w.Header().Set("Retry-After", "1")
			shape(w, failure{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "rate limiter unavailable; retry later", Retryable: true, RPCCode: jsonrpc.CodeInternalError})
			return p, false
		}
		d.SetHeaders(w.Header())
		if !d.Allowed {
			s.metrics.rateLimited.WithLabelValues(protocol).Inc()
			body := d.ExceededBody()
			shape(w, failure{Status: http.StatusTooManyRequests, Code: "rate_limit_exceeded",
				Message:   "rate limit exceeded: " + strconv.Itoa(d.Limit) + " requests per " + d.Window,
				Retryable: true, RPCCode: jsonrpc.CodeRateLimited, Data: body})
			return p, false
		}
	}
	return p, true
}

// streamSlot takes one of the principal's concurrent stream slots, or
// returns the refusal (429, Retry-After 1) when all are taken.
func (s *Server) streamSlot(p Principal) (func(), *failure) {
	if s.opts.streams == nil {
		return func() {}, nil
	}
	key := p.UserID
	if key == "" {
		key = "anonymous"
	}
	release, ok := s.opts.streams.AcquireStream(key)
	if !ok {
		return nil, &failure{Status: http.StatusTooManyRequests, Code: "too_many_streams",
			Message: "too many concurrent streams for this principal", Retryable: true, RPCCode: jsonrpc.CodeRateLimited}
	}
	return release, nil
}

// acquireStream is streamSlot answering its refusal in shape.
func (s *Server) acquireStream(w http.ResponseWriter, p Principal, shape errorShape) (func(), bool) {
	release, f := s.streamSlot(p)
	if f != nil {
		w.Header().Set("Retry-After", "1")
		shape(w, *f)
		return nil, false
	}
	return release, true
}

// rpcStreamSlot is streamSlot answering its refusal to a JSON-RPC call.
func (s *Server) rpcStreamSlot(rep rpcReply, p Principal) (func(), bool) {
	release, f := s.streamSlot(p)
	if f != nil {
		rep.Header().Set("Retry-After", "1")
		rep.Refuse(*f)
		return nil, false
	}
	return release, true
}

// charge takes n more requests from the principal's rate limit (the
// elements of a batch after the first); on refusal it answers 429 in the
// endpoint's shape.
func (s *Server) charge(w http.ResponseWriter, r *http.Request, p Principal, protocol string, n int, shape errorShape) bool {
	if s.opts.limiter == nil {
		return true
	}
	key := p.UserID
	if key == "" {
		key = "anonymous"
	}
	for i := 0; i < n; i++ {
		d, err := s.opts.limiter.Allow(r.Context(), key)
		if err != nil {
			w.Header().Set("Retry-After", "1")
			shape(w, failure{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "rate limiter unavailable; retry later", Retryable: true, RPCCode: jsonrpc.CodeInternalError})
			return false
		}
		if !d.Allowed {
			d.SetHeaders(w.Header())
			s.metrics.rateLimited.WithLabelValues(protocol).Inc()
			shape(w, failure{Status: http.StatusTooManyRequests, Code: "rate_limit_exceeded",
				Message:   "rate limit exceeded by the batch: " + strconv.Itoa(d.Limit) + " requests per " + d.Window,
				Retryable: true, RPCCode: jsonrpc.CodeRateLimited, Data: d.ExceededBody()})
			return false
		}
	}
	return true
}
