package ingress

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// failure is a protocol-neutral refusal; each endpoint writes it in its
// protocol's own error shape (see errorShape). It is the protocol
// packages' host.Refusal.
type failure = host.Refusal

// errorShape writes a failure in one protocol's error format.
type errorShape = host.Refuse

// gate authenticates the request, strips its credential headers and
// applies the principal's rate limit, then refuses a request no door
// reads as sent (requestRefusal: a query that is no URL-encoded form, a
// query parameter given twice, a body that is not the door's media type
// or has a content coding). On refusal it writes the answer in the
// endpoint's shape and returns ok=false; nothing has been published.
//
// A call its door marked as a cancel (host.WithCancel) is admitted on the
// principal's budget of cancels when the rate limit refuses it (rateLimit).
func (s *Server) gate(w http.ResponseWriter, r *http.Request, protocol string, shape errorShape) (Principal, bool) {
	return s.gateCancel(w, r, protocol, shape, host.CancelTest(r.Context()), nil)
}

// gateCancel is gate, cancel the test of a cancel (nil: the call is none)
// and open the test of an open call (host.RPCEndpoint.Open; nil: the call
// is none): a request that presents no credential where the auth requires
// one is admitted when open reports true, as the unauthenticated
// principal (no user id: the rate limit counts it as the anonymous
// principal); a presented credential is checked as always.
func (s *Server) gateCancel(w http.ResponseWriter, r *http.Request, protocol string, shape errorShape, cancel, open func() bool) (Principal, bool) {
	p := Principal{UserID: "", IdentityOrigin: "user", Scheme: SchemeNone, Open: true}
	if s.opts.auth != nil {
		var err error
		p, err = s.authenticated(r)
		none := !presentsCredential(r.Header)
		StripCredentialHeaders(r.Header)
		if err != nil && none && open != nil && open() {
			p, err = Principal{IdentityOrigin: "user"}, nil
		}
		if err != nil {
			s.metrics.authFailures.WithLabelValues(protocol).Inc()
			host.CloseUnread(w.Header(), r)
			shape(w, s.authRefusal(w.Header(), err))
			return p, false
		}
	} else {
		StripCredentialHeaders(r.Header)
	}
	if f, canceled := s.rateLimit(r.Context(), p, protocol, 1, w.Header(), false, cancel); canceled {
		return p, false
	} else if f != nil {
		host.CloseUnread(w.Header(), r)
		shape(w, *f)
		return p, false
	}
	pr, _ := s.opts.protocols.Lookup(protocol)
	if f := requestRefusal(r, w.Header(), pr, bodyChecked(r.Context())); f != nil {
		host.CloseUnread(w.Header(), r)
		shape(w, *f)
		return p, false
	}
	return p, true
}

// authenticatedKey keys the outcome of a credential checked before the
// gate (servePeeked: before the body is read).
type authenticatedKey struct{}

// authentication is a credential's check: the principal, or the error.
type authentication struct {
	p   Principal
	err error
}

// withAuthenticated records in ctx that the request's credential was
// checked, to p or err: the gate takes that outcome instead of checking
// it again (a refused credential counted once by the failure limit).
func withAuthenticated(ctx context.Context, p Principal, err error) context.Context {
	return context.WithValue(ctx, authenticatedKey{}, authentication{p: p, err: err})
}

// authenticated is the outcome of r's credential: the one recorded
// (withAuthenticated), or the server's Auth's check.
func (s *Server) authenticated(r *http.Request) (Principal, error) {
	if a, ok := r.Context().Value(authenticatedKey{}).(authentication); ok {
		return a.p, a.err
	}
	return s.opts.auth.Authenticate(r)
}

// authRefusal is the answer to a credential the server's Auth refused
// with err, its WWW-Authenticate challenges added to h: 401
// unauthenticated, 403 forbidden for a valid credential that may not be
// used (ErrForbidden), as AuthStatus says; 429 with Retry-After, unchecked,
// for a client over the failure limit (ThrottledRefusal). Every front door
// answers an authentication failure with it, and so does the read API
// (readGate).
func (s *Server) authRefusal(h http.Header, err error) failure {
	if f, ok := ThrottledRefusal(h, err); ok {
		return f
	}
	s.opts.auth.SetChallenge(h, err)
	code, rpc := "unauthenticated", jsonrpc.CodeAuthentication
	if errors.Is(err, ErrForbidden) {
		code, rpc = "forbidden", jsonrpc.CodeAuthorization
	}
	return failure{Status: AuthStatus(err), Code: code, Message: egress.ClientMessage(err), RPCCode: rpc}
}

// streamSlot takes one of the principal's concurrent stream slots, or
// returns the refusal (429, Retry-After 1) when all are taken.
func (s *Server) streamSlot(p Principal) (func(), *failure) {
	if s.opts.streams == nil {
		return func() {}, nil
	}
	release, ok := s.opts.streams.AcquireStream(countedAs(p))
	if !ok {
		return nil, &failure{Status: http.StatusTooManyRequests, Code: "too_many_streams",
			Message: "too many concurrent streams for this principal", Retryable: true, RPCCode: jsonrpc.CodeRateLimited,
			RetryAfter: time.Second}
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
func (s *Server) rpcStreamSlot(rep host.Reply, p Principal) (func(), bool) {
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
	if f, canceled := s.rateLimit(r.Context(), p, protocol, n, w.Header(), true, nil); canceled {
		return false
	} else if f != nil {
		shape(w, *f)
		return false
	}
	return true
}

// rateLimit charges n requests to p's rate limit. It returns the refusal
// (429 over the limit, 503 when a fail-closed limiter is unavailable), with
// Retry-After and the X-RateLimit headers set in hdr, or canceled when ctx
// ended first. batch words the refusal as the batch's.
//
// A single call (n 1) that the limit refuses is asked cancel (nil: it is
// no cancel); a cancel is then charged to the principal's budget of
// cancels instead (Limiter.AllowCancel): admitted within it, its headers
// the budget's, else refused with the budget's limit and wait. Only a call
// over the limit is asked, so a door's test may read the body (bounded):
// the common call costs nothing more.
func (s *Server) rateLimit(ctx context.Context, p Principal, protocol string, n int, hdr http.Header, batch bool, cancel func() bool) (f *failure, canceled bool) {
	if s.opts.limiter == nil {
		return nil, false
	}
	key := countedAs(p)
	// A batch's elements are charged all or none: a refused batch ran
	// nothing (it cost the elements that fitted before the limit), and
	// its answer carries what is left after all of them.
	d, err := s.opts.limiter.AllowN(ctx, key, n)
	if err == nil && !d.Allowed && n == 1 && cancel != nil && s.opts.limiter.CancelsPerMinute() > 0 && cancel() {
		d, err = s.opts.limiter.AllowCancel(ctx, key)
	}
	if err != nil {
		// The call's own context ended (canceled, or its deadline passed
		// during the KV's round trip): its client is gone, and the
		// limiter was not down.
		if errors.Is(err, context.Canceled) || ctx.Err() != nil {
			return nil, true
		}
		hdr.Set("Retry-After", "1")
		return &failure{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "rate limiter unavailable; retry later", Retryable: true,
			RPCCode: jsonrpc.CodeInternalError, RetryAfter: time.Second}, false
	}
	d.SetHeaders(hdr)
	if !d.Allowed {
		s.metrics.rateLimited.WithLabelValues(protocol).Inc()
		msg := "rate limit exceeded: "
		if batch {
			msg = "rate limit exceeded by the batch: "
		}
		// The wait goes in the refusal too, not only in hdr: a binding
		// whose errors carry it as a detail (A2A v1.0's RetryInfo) reads
		// it there, and a header set on another writer never reaches it.
		return &failure{Status: http.StatusTooManyRequests, Code: "rate_limit_exceeded",
			Message:   msg + d.limitText(),
			Retryable: true, RPCCode: jsonrpc.CodeRateLimited, Data: d.ExceededBody(),
			RetryAfter: time.Duration(d.retryAfterSeconds()) * time.Second}, false
	}
	return nil, false
}

// chargeBytes counts a request of n bytes p had stored against p's budget
// of request bytes (Limiter.ChargeBytes), which the gate's next decision
// for p reads.
func (s *Server) chargeBytes(p Principal, n int64) {
	if s.opts.limiter == nil {
		return
	}
	s.opts.limiter.ChargeBytes(countedAs(p), n)
}

// countedAs is the principal p is counted as by the rate limits and the
// stream slots: its user id, "anonymous" for none.
func countedAs(p Principal) string {
	if p.UserID == "" {
		return DefaultAnonymousPrincipal
	}
	return p.UserID
}

// stdioGate is the gate of a message read on stdio, charged n requests of
// its principal's rate limit. Under the server's auth its principal is the
// one of the connection's credential (WithStdioCredential in ctx),
// authenticated for each message, so that a key removed or a token expired
// stops working mid-session; without one it is the anonymous principal,
// refused when the auth has no none scheme. Refusals are ACP's: -32000
// (authentication required) for a missing or refused credential, its
// message naming the variable to set (stdioCredentialHint), -32003
// for a disabled principal. Without auth every message is anonymous.
// A single call that is a cancel (isCancel) is admitted over the rate
// limit as at the HTTP doors (rateLimit).
func (s *Server) stdioGate(ctx context.Context, protocol string, n int, isCancel func() bool) (Principal, *failure, bool) {
	p := Principal{UserID: "", IdentityOrigin: "user", Scheme: SchemeNone, Open: true}
	if s.opts.auth != nil {
		var err error
		if cred, ok := stdioCredential(ctx); ok {
			p, err = s.opts.auth.AuthenticateHeader(cred.Clone())
		} else {
			p, err = s.opts.auth.Anonymous()
		}
		if err != nil {
			s.metrics.authFailures.WithLabelValues(protocol).Inc()
			f := s.authRefusal(http.Header{}, err)
			if f.RPCCode == jsonrpc.CodeAuthentication {
				f.RPCCode = jsonrpc.CodeACPAuthRequired
				f.Message += stdioCredentialHint(ctx)
			}
			return p, &f, true
		}
	}
	f, canceled := s.rateLimit(ctx, p, protocol, n, http.Header{}, n > 1, isCancel)
	return p, f, !canceled
}
